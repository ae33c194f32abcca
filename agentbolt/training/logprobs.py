"""Token logprobs of padded id batches, computed only where they are wanted.

A trainer needs ``log π(ids[n, t] | ids[n, < t])`` at its trained positions — a GRPO
sample trains its few dozen response tokens out of hundreds — so the output layer runs
only on the hidden states that predict those tokens: with a 49k-token vocabulary the full
``[N, T, V]`` logits (and their log-softmax and its gradient) are otherwise the biggest
tensors and a fifth of the arithmetic of a step. The model's body still runs on every
position (the trained tokens attend to the prompt).

Shared prefixes: rows whose first P tokens are the same (a GRPO group's prompt: system
prompt, few-shot turns, question) run those P tokens once per distinct prefix; every row
then continues from its prefix's keys/values (``prefix_group`` says which prefix a row
uses). Exact: the rows see the same keys/values, and the gradient of a prefix is the sum
over its rows.

Models whose logits are more than ``lm_head(hidden)`` (soft-capped or scaled: Gemma 2/3,
Cohere, Granite) take the full-logits path — the same prefix groups, the logits of every
position after them — with the same results at the wanted positions.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "chosen_logprobs", "prefix_sharing_ok", "prefixed_hidden", "shifted_logprobs", "split_head", "token_logprobs",
]


def token_logprobs(
    model: Any, input_ids: Tensor, attention_mask: Tensor, *, with_entropy: bool = False, shared_prefix: int = 0,
    prefix_group: Tensor | None = None, positions: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """``[N, T]`` logprobs (and detached entropies if asked) at ``positions`` (``[N, T]``,
    nonzero where wanted; every position when None); 0 elsewhere, at t = 0 and at t ≤ P =
    ``shared_prefix`` when P > 0 (the caller passes P only when no token up to P is wanted).

    ``prefix_group`` (``[N]``, ids 0..G−1): rows of one group share their first P tokens;
    None: all rows do."""
    N, T = input_ids.shape
    P = shared_prefix
    want = torch.ones((N, T), dtype=torch.bool, device=input_ids.device) if positions is None else positions != 0
    want = want.clone()
    want[:, : P + 1] = False  # nothing predicts token 0; tokens ≤ P are the shared part's
    split = split_head(model)
    sharing = P > 0 and N > 1 and prefix_sharing_ok(model)
    if split is None:
        return _full_logits(model, input_ids, attention_mask, want, with_entropy, P if sharing else 0, prefix_group)
    backbone, head = split
    if sharing:
        hidden, start = prefixed_hidden(backbone, input_ids, attention_mask, P, prefix_group), P
    else:
        hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        start = 0
    sel = want[:, start + 1 :]  # hidden state t − 1 predicts token t
    logits = _head(head, hidden[:, :-1][sel])
    lp, ent = chosen_logprobs(logits, input_ids[:, start + 1 :][sel], with_entropy=with_entropy)
    zeros = torch.zeros((N, T), dtype=lp.dtype, device=lp.device)
    return zeros.masked_scatter(want, lp), None if ent is None else zeros.masked_scatter(want, ent)


ROW_MULTIPLE = 8
"""The output layer runs on a multiple of this many rows: BLAS picks other kernels (other
rounding) for a few rows, so without it a token's logprob would depend on how many others
its micro-batch trains — and a ratio that starts at 1 on the sampling batch would not."""


def _head(head: Any, rows: Tensor) -> Tensor:
    K = rows.shape[0]
    pad = -K % ROW_MULTIPLE
    if pad == 0:
        return head(rows)
    return head(torch.cat([rows, rows.new_zeros((pad, rows.shape[1]))]))[:K]


def chosen_logprobs(logits: Tensor, targets: Tensor, *, with_entropy: bool = False) -> tuple[Tensor, Tensor | None]:
    """``log_softmax(logits)[k, targets[k]]`` for ``[K, V]`` logits (in float32 at least),
    and the entropy of each row (detached) if asked."""
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    lp, entropy = _ChosenLogprob.apply(logits, targets, with_entropy)
    return lp, entropy if with_entropy else None


class _ChosenLogprob(torch.autograd.Function):
    """logit[target] − logsumexp(logits) per row, and the entropy, from one softmax: the
    ``[K, V]`` softmax made in the forward is all the backward needs (g · (onehot − p)),
    where autograd's gather + logsumexp (+ a softmax for the entropy) would make four
    such tensors and exponentiate the logits three times."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, targets: Tensor, with_entropy: bool) -> tuple[Tensor, Tensor]:
        top = logits.amax(dim=-1, keepdim=True)
        p = (logits - top).exp_()
        total = p.sum(dim=-1, keepdim=True)
        p.div_(total)
        lse = (top + total.log()).squeeze(-1)
        lp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
        entropy = lse - torch.linalg.vecdot(p, logits) if with_entropy else lse.new_zeros(0)
        ctx.save_for_backward(p, targets)
        ctx.mark_non_differentiable(entropy)
        return lp, entropy

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor, None, None]:
        p, targets = ctx.saved_tensors
        g = grads[0].unsqueeze(-1)
        return torch.mul(p, -g).scatter_add_(-1, targets.unsqueeze(-1), g), None, None


def prefixed_hidden(backbone: Any, input_ids: Tensor, attention_mask: Tensor, P: int,
                    prefix_group: Tensor | None) -> Tensor:
    """Hidden states of positions P..T−1, the first P tokens run once per prefix group."""
    return _prefixed_forward(backbone, input_ids, attention_mask, P, prefix_group).last_hidden_state


def _prefixed_forward(module: Any, input_ids: Tensor, attention_mask: Tensor, P: int,
                      prefix_group: Tensor | None) -> Any:
    """``module``'s output on positions P..T−1 (a backbone's hidden states, or a whole
    model's logits), the first P tokens run once per prefix group: row n continues from
    the keys/values of its own group's prefix (``prefix_group[n]``; None: all rows share one)."""
    N = input_ids.shape[0]
    group = torch.zeros(N, dtype=torch.long, device=input_ids.device) if prefix_group is None else prefix_group
    G = int(group.max()) + 1
    first = torch.full((G,), N, dtype=torch.long, device=group.device).scatter_reduce(
        0, group, torch.arange(N, device=group.device), reduce="amin")
    head = module(input_ids=input_ids[first, :P], attention_mask=attention_mask[first, :P], use_cache=True)
    cache = getattr(head, "cache", None) or head.past_key_values  # third-party: models' internals vary
    cache.batch_select_indices(group)  # row n continues from its group's keys/values
    kw = {_cache_argument(module): cache}  # `cache` since transformers 5.x, `past_key_values` before
    return module(input_ids=input_ids[:, P:], attention_mask=attention_mask, use_cache=True, **kw)


def _full_logits(model: Any, input_ids: Tensor, attention_mask: Tensor, want: Tensor, with_entropy: bool,
                 P: int, prefix_group: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """The whole model's logits at every position (models with more than a plain output
    layer); with P > 0 each prefix group's first P tokens run once, as in the split path."""
    if P > 0:
        tail = _prefixed_forward(model, input_ids, attention_mask, P, prefix_group).logits
        lp, ent = shifted_logprobs(tail, input_ids[:, P:], with_entropy=with_entropy)
        pad = torch.zeros_like(input_ids[:, :P], dtype=lp.dtype)
        lp, ent = torch.cat([pad, lp], dim=1), None if ent is None else torch.cat([pad, ent], dim=1)
    else:
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        lp, ent = shifted_logprobs(logits, input_ids, with_entropy=with_entropy)
    keep = want.to(lp.dtype)
    return lp * keep, None if ent is None else ent * keep


def shifted_logprobs(logits: Tensor, input_ids: Tensor, *, with_entropy: bool = False) -> tuple[Tensor, Tensor | None]:
    """log-softmax of ``logits[:, t-1]`` at ``input_ids[:, t]``, as ``[N, T]`` with 0 at t = 0."""
    logits = logits[:, :-1].float()
    targets = input_ids[:, 1:].unsqueeze(-1)
    lse = torch.logsumexp(logits, dim=-1)
    lp = logits.gather(-1, targets).squeeze(-1) - lse
    zero = torch.zeros_like(lp[:, :1])
    entropy = None
    if with_entropy:
        with torch.no_grad():
            p = torch.softmax(logits, dim=-1)
            ent = lse - (p * logits).sum(-1)
            entropy = torch.cat([zero, ent], dim=1)
    return torch.cat([zero, lp], dim=1), entropy


def split_head(model: Any) -> tuple[Any, Any] | None:
    """``(backbone, output layer)`` of a causal LM whose logits are ``head(backbone(...))``
    (a peft model: its base model's, LoRAs included), or None when the logits are more
    than that (soft-capped, scaled) or the model does not say."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(base, getattr(base, "base_model_prefix", ""), None)  # third-party: models' internals vary
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    config = getattr(base, "config", None)  # third-party: models' internals vary
    scales = ("final_logit_softcapping", "logit_scale", "logits_scaling")
    scaled = any(getattr(config, k, None) not in (None, 1.0) for k in scales)  # third-party: models' internals vary
    if backbone is None or backbone is base or head is None or scaled:
        return None
    return backbone, head


def prefix_sharing_ok(model: Any) -> bool:
    """Whether a forward of ``model`` may reuse a key/value cache: not while gradient
    checkpointing is on in a forward that builds a graph — transformers then drops the
    cache (a replayed layer would append to it twice) — so that forward runs whole."""
    if not (model.training and torch.is_grad_enabled()):
        return True
    for module in model.modules():
        if getattr(module, "gradient_checkpointing", False) is True:  # third-party: models' internals vary
            return False
    return True


def _cache_argument(model: Any) -> str:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
