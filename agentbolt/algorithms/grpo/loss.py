"""The GRPO policy loss, normalised per rollout.

Shapes: ``[N, T]`` for N padded samples of T tokens, where ``logprobs[n, t]`` is
log π(token t | tokens < t) (the caller shifts the logits) and ``loss_mask`` is 1 on the
trained (response) tokens; ``advantages`` is ``[N]`` (one A per sample, its rollout's);
``rollout_index`` is ``[N]`` with values 0..R−1 saying which rollout each sample is from.

Per token, with π_behav the sampling-time policy (``old_logprobs``):

    ρ_t = π_θ / π_old                          (π_old = π_behav, or π_prox when given)
    w_t = min(π_prox / π_behav, C)             truncated importance weight, detached;
                                               1 when no ``prox_logprobs`` are given
    s_t = min(ρ_t A, clip(ρ_t, 1 − ε_low, 1 + ε_high) A)
    s_t = max(s_t, c · A)  where A < 0         dual clip (``clip_ratio_c`` = c > 1; off when None)
    ℓ_t = −w_t · s_t + β · KL_t
    KL_t = exp(q_t) − q_t − 1,  q_t = log π_ref − log π_θ     (k3 estimator, ≥ 0)

``prox_logprobs`` are the trainer's own logprobs under the weights at the start of the
update: pass them when the policy has moved since sampling (async, stale samples) so the
ratio is clipped around the proximal policy and the gap to the behaviour policy is
corrected by the capped weight w_t (decoupled PPO / truncated IS).

Loss = (1/R) Σ_r (1/D_r) Σ_{t ∈ T_r} ℓ_t, with T_r every trained token of every sample of
rollout r, and by ``loss_norm``:

* ``rollout_token_mean`` (default): D_r = |T_r| — each rollout weighs the same whatever its
  number of calls and tokens; a long rollout's tokens each weigh less;
* ``rollout_sum``: D_r = L, a constant (``norm_tokens``, e.g. the generation budget: Dr.
  GRPO's constant-length normalisation) — every token weighs the same, so a long wrong
  rollout is pushed down as hard per token as a short one; a long rollout weighs more.

A rollout may be spread over several calls of this function (micro-batches split by
tokens): pass its whole |T_r| in ``rollout_tokens`` and the batch's R in ``num_rollouts``,
and the losses of the parts add up to the loss of the whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

__all__ = ["LossNorm", "GRPOLossOutput", "grpo_loss", "per_rollout_mean"]

LossNorm = Literal["rollout_token_mean", "rollout_sum"]


@dataclass(frozen=True, slots=True)
class GRPOLossOutput:
    """The loss to backpropagate and detached statistics for logging (token means)."""

    loss: Tensor
    clip_fraction: float
    """Share of trained tokens whose clip is active: ρ_t > 1 + ε_high with A > 0, or
    ρ_t < 1 − ε_low with A < 0 (the gradient is cut there) — verl's ``pg_clipfrac``,
    TRL's ``clip_ratio``."""
    ratio_outside_fraction: float
    """Share of trained tokens whose ratio lay outside [1 − ε_low, 1 + ε_high], whatever A's sign."""
    dual_clip_fraction: float
    """Share of trained tokens held by the dual clip (A < 0 and ρ_t > c)."""
    ratio_mean: float
    importance_weight_mean: float
    kl: float | None
    entropy: float | None
    num_rollouts: int


def per_rollout_mean(values: Tensor, mask: Tensor, rollout_index: Tensor) -> Tensor:
    """(1/R) Σ_r mean of ``values`` over rollout r's masked tokens (rollouts without any are skipped)."""
    R = int(rollout_index.max().item()) + 1 if rollout_index.numel() else 0
    sums = torch.zeros(R, dtype=values.dtype, device=values.device).index_add(0, rollout_index, (values * mask).sum(-1))
    counts = torch.zeros(R, dtype=values.dtype, device=values.device).index_add(0, rollout_index, mask.sum(-1))
    present = counts > 0
    return (sums[present] / counts[present]).mean() if bool(present.any()) else values.sum() * 0.0


def grpo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    loss_mask: Tensor,
    rollout_index: Tensor,
    *,
    prox_logprobs: Tensor | None = None,
    ref_logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    clip_ratio_c: float | None = None,
    is_cap: float = 2.0,
    kl_coef: float = 0.0,
    loss_norm: LossNorm = "rollout_token_mean",
    norm_tokens: float = 1.0,
    rollout_tokens: Tensor | None = None,
    num_rollouts: int | None = None,
) -> GRPOLossOutput:
    """The GRPO loss (see module doc); ``entropy`` ``[N, T]`` is only logged.

    ``rollout_tokens`` (``[N]``: |T_r| of each sample's rollout, over the whole batch) and
    ``num_rollouts`` (the batch's R): this call holds part of a batch; default: these samples."""
    if logprobs.shape != old_logprobs.shape or logprobs.shape != loss_mask.shape or logprobs.dim() != 2:
        raise ValueError(
            f"logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)} and loss_mask "
            f"{tuple(loss_mask.shape)} must all be [N, T] (pad samples to one length)"
        )
    if advantages.shape != (logprobs.shape[0],) or rollout_index.shape != (logprobs.shape[0],):
        raise ValueError(
            f"advantages {tuple(advantages.shape)} and rollout_index {tuple(rollout_index.shape)} must be [N] "
            f"with N = {logprobs.shape[0]}: one advantage and one rollout number per sample"
        )
    if clip_ratio_c is not None and clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (verl's default is 3.0), got {clip_ratio_c}")
    mask = loss_mask.to(logprobs.dtype)
    A = advantages.to(logprobs.dtype).unsqueeze(-1)
    if prox_logprobs is None:
        log_old, w = old_logprobs.detach(), torch.ones_like(logprobs)
    else:
        log_old = prox_logprobs.detach()
        w = torch.exp(log_old - old_logprobs.detach()).clamp(max=is_cap)
    rho = torch.exp(logprobs - log_old)
    surrogate = torch.minimum(rho * A, rho.clamp(1.0 - eps_low, 1.0 + eps_high) * A)
    if clip_ratio_c is not None:
        surrogate = torch.where(A < 0, torch.maximum(surrogate, clip_ratio_c * A), surrogate)
    per_token = -w * surrogate
    kl = None
    if ref_logprobs is not None:
        q = ref_logprobs - logprobs
        kl = torch.exp(q) - q - 1.0
        if kl_coef:
            per_token = per_token + kl_coef * kl
    loss = _normalised_sum(per_token, mask, rollout_index, loss_norm, norm_tokens, rollout_tokens, num_rollouts)

    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)

        def token_mean(x: Tensor) -> float:
            return float((x * mask).sum() / n)

        active = ((rho > 1.0 + eps_high) & (A > 0)) | ((rho < 1.0 - eps_low) & (A < 0))
        outside = (rho < 1.0 - eps_low) | (rho > 1.0 + eps_high)
        dual = (A < 0) & (rho > clip_ratio_c) if clip_ratio_c is not None else torch.zeros_like(active)
        return GRPOLossOutput(
            loss=loss,
            clip_fraction=token_mean(active.to(mask.dtype)),
            ratio_outside_fraction=token_mean(outside.to(mask.dtype)),
            dual_clip_fraction=token_mean(dual.to(mask.dtype)),
            ratio_mean=token_mean(rho),
            importance_weight_mean=token_mean(w),
            kl=None if kl is None else token_mean(kl),
            entropy=None if entropy is None else token_mean(entropy),
            num_rollouts=int(torch.unique(rollout_index[mask.sum(-1) > 0]).numel()),
        )


def _normalised_sum(per_token: Tensor, mask: Tensor, rollout_index: Tensor, loss_norm: LossNorm, L: float,
                    rollout_tokens: Tensor | None, R: int | None) -> Tensor:
    """(1/R) Σ_n (1/D_{r(n)}) Σ_t ℓ_{n,t} m_{n,t}, with D_r = |T_r| or L (see module doc)."""
    if loss_norm not in ("rollout_token_mean", "rollout_sum"):
        raise ValueError(f"loss_norm must be 'rollout_token_mean' or 'rollout_sum', got {loss_norm!r}")
    sums = (per_token * mask).sum(-1)  # [N]
    if rollout_tokens is None:  # these samples hold their rollouts whole
        rollouts = int(rollout_index.max().item()) + 1 if rollout_index.numel() else 0
        counts = torch.zeros(rollouts, dtype=mask.dtype, device=mask.device).index_add(0, rollout_index, mask.sum(-1))
        rollout_tokens = counts[rollout_index]
        R = R if R is not None else int((counts > 0).sum())
    elif R is None:
        raise ValueError("rollout_tokens (a part of a batch) needs num_rollouts, the batch's R")
    if not R:
        return per_token.sum() * 0.0
    D = rollout_tokens.to(mask.dtype).clamp(min=1.0) if loss_norm == "rollout_token_mean" else torch.full_like(
        sums, float(L))
    return (sums / D).sum() / R
