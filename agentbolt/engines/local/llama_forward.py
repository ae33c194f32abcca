"""A ragged forward pass over a Llama-shaped Hugging Face model, with a preallocated KV cache.

Why not ``model(...)``: the generic path rebuilds masks and grows its cache with
``torch.cat`` at every step, and needs one padded batch. Here one forward pass takes any
mix of rows — rows decoding their next token and rows prefilling (the rest of) a new
prompt — as one flat list of tokens: every weight matrix runs once over all of them
(the cost of decoding on a CPU is reading the weights, so more tokens per pass is nearly
free), attention runs per group over a preallocated buffer, and the output head runs only
for the positions whose next token is sampled.

The weights are the model's own modules (``q_proj``, the MLP's projections, the norms,
``rotary_emb``, ``lm_head``): the standard RMSNorm runs as one ``F.rms_norm`` call, the
rotary table is the model's own, the linear layers run on laid-out copies of their weights
(:class:`.packed_linear.PackedLinears`: oneDNN for two rows or more, MKL on transposed
copies for one; remade when a weight changes), so an in-place weight swap (full state
dict or merged LoRA) is served at the next pass. A step that only decodes one row runs
:class:`.one_row.OneRowStep` instead, the same math in fewer ops.
Grouped-query attention runs without repeating K/V: the query heads that share a KV head
are laid out as extra query rows of that head.

Cache layout: ``k[layer]`` / ``v[layer]`` are ``[slots, kv_heads, capacity, head_dim]``.
The caller keeps the rows it runs in slots ``0..n-1`` (see :meth:`RaggedLlama.move`), so
attention reads a view of the buffer, never a gathered copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from agentbolt.engines.local.blocks import mlp_residual, rms_norm
from agentbolt.engines.local.one_row import OneRowStep
from agentbolt.engines.local.packed_linear import PackedLinears

__all__ = ["RaggedLlama", "Step", "unsupported_reason"]

_FAMILIES = {"llama", "mistral", "qwen2", "qwen3"}
_STATIC_ROPE = {None, "default", "linear", "llama3", "yarn"}


def unsupported_reason(model: Any) -> str | None:
    """Why ``model`` cannot run on :class:`RaggedLlama` (None when it can)."""
    config = getattr(model, "config", None)  # third-party: model layouts vary
    kind = getattr(config, "model_type", None)  # third-party: model layouts vary
    if kind not in _FAMILIES:
        return f"model_type {kind!r} is not one of {sorted(_FAMILIES)}"
    inner = getattr(model, "model", None)  # third-party: model layouts vary
    if inner is None or not hasattr(inner, "layers") or not hasattr(model, "lm_head"):
        return "not a <Family>ForCausalLM with .model.layers and .lm_head"
    windowed = getattr(config, "use_sliding_window", kind == "mistral")  # third-party: model layouts vary
    if getattr(config, "sliding_window", None) and windowed:  # third-party: model layouts vary
        return "sliding-window attention"
    layer_types = getattr(config, "layer_types", None) or []  # third-party: model layouts vary
    if any(t != "full_attention" for t in layer_types):
        return "layers other than full attention"
    rotary = getattr(inner, "rotary_emb", None)  # third-party: model layouts vary
    rope = getattr(rotary, "rope_type", None)  # third-party: model layouts vary
    if rotary is None or rope not in _STATIC_ROPE:
        return f"rope type {rope!r} (only position-independent tables are supported)"
    for layer in inner.layers:
        attn = getattr(layer, "self_attn", None)  # third-party: model layouts vary
        if attn is None or not all(hasattr(attn, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj", "scaling")):
            return "attention without q/k/v/o projections"
        mlp = getattr(layer, "mlp", None)  # third-party: model layouts vary
        if mlp is None or not all(hasattr(mlp, p) for p in ("gate_proj", "up_proj", "down_proj", "act_fn")):
            return "an MLP other than down(act(gate(x)) * up(x))"
    return None


@dataclass
class Step:
    """One forward pass: ``decode`` rows (slots ``0..d-1``, one token each) then prefill rows.

    ``decode_tokens[i]`` goes to slot ``i`` at position ``decode_lengths[i]`` (the tokens
    already cached there). Prefill row ``j`` is slot ``d + j``: ``prefill_tokens[j]`` are
    written from position ``prefill_starts[j]`` on (the tokens before are cached already).
    """

    decode_tokens: list[int]
    decode_lengths: list[int]
    prefill_tokens: list[list[int]]
    prefill_starts: list[int]


class RaggedLlama:
    """Runs :class:`Step` s over ``model`` with a KV buffer of ``slots`` rows."""

    def __init__(self, model: Any, *, slots: int, max_len: int, device: torch.device,
                 initial_capacity: int = 64) -> None:
        reason = unsupported_reason(model)
        if reason is not None:
            raise ValueError(f"RaggedLlama cannot run this model: {reason}")
        self.model = model
        self.inner = model.model
        self.layers = list(model.model.layers)
        config = model.config
        self.heads = int(config.num_attention_heads)
        kv_heads = getattr(config, "num_key_value_heads", None)  # third-party: model layouts vary
        self.kv_heads = int(kv_heads or self.heads)
        self.group = self.heads // self.kv_heads
        head_dim = getattr(config, "head_dim", None)  # third-party: model layouts vary
        self.head_dim = int(head_dim or config.hidden_size // self.heads)
        self.slots = slots
        self.max_len = max_len
        self.device = device
        dtype = next(model.parameters()).dtype
        self.dtype = dtype
        with torch.inference_mode():
            probe = torch.zeros(1, dtype=dtype, device=device)
            cos, sin = self.inner.rotary_emb(probe, torch.arange(max_len, device=device)[None])
        self._cos, self._sin = cos[0], sin[0]  # [max_len, head_dim]
        self.linear = PackedLinears()
        self.one_row = OneRowStep(model, self.linear, heads=self.heads, kv_heads=self.kv_heads,
                                  head_dim=self.head_dim, cos=self._cos, sin=self._sin)
        self.capacity = 0
        shape = (len(self.layers), slots, self.kv_heads, 0, self.head_dim)
        self.k = torch.empty(shape, dtype=dtype, device=device)
        self.v = torch.empty(shape, dtype=dtype, device=device)
        self.reserve(min(initial_capacity, max_len))

    @property
    def bytes_per_token(self) -> int:
        return 2 * len(self.layers) * self.kv_heads * self.head_dim * self.k.element_size()

    # ---- cache management ----------------------------------------------------------------
    def reserve(self, length: int) -> None:
        """Make room for ``length`` positions per slot (grows by a quarter, in steps of 64
        positions: the buffer holds ``slots x capacity`` positions, so it should not
        overshoot by much)."""
        if length <= self.capacity:
            return
        if length > self.max_len:
            raise ValueError(f"{length} positions exceed the model's context window ({self.max_len})")
        new = min(self.max_len, -(-max(length, self.capacity * 5 // 4) // 64) * 64)
        self.k = self._grown(self.k, new)  # one at a time: at most one old cache and its copy at once
        self.v = self._grown(self.v, new)
        self.capacity = new

    def _grown(self, old: torch.Tensor, positions: int) -> torch.Tensor:
        """``old`` (a K or V cache) copied into a cache of ``positions`` positions."""
        grown = torch.zeros((*old.shape[:3], positions, self.head_dim), dtype=self.dtype, device=self.device)
        grown[:, :, :, : self.capacity] = old
        return grown

    def move(self, src: int, dst: int, length: int) -> None:
        """Copy slot ``src``'s first ``length`` positions into slot ``dst``."""
        if src != dst and length:
            self.k[:, dst, :, :length] = self.k[:, src, :, :length]
            self.v[:, dst, :, :length] = self.v[:, src, :, :length]

    def read(self, slot: int, length: int) -> torch.Tensor:
        """A copy of slot ``slot``'s first ``length`` positions: ``[2, layers, kv_heads, length, head_dim]``."""
        return torch.stack((self.k[:, slot, :, :length], self.v[:, slot, :, :length]))

    def write(self, slot: int, kv: torch.Tensor, length: int) -> None:
        """Put the first ``length`` positions of ``kv`` (from :meth:`read`) into ``slot``."""
        self.reserve(length)
        self.k[:, slot, :, :length] = kv[0, :, :, :length]
        self.v[:, slot, :, :length] = kv[1, :, :, :length]

    # ---- the forward pass ------------------------------------------------------------------
    def forward(self, step: Step) -> torch.Tensor:
        """Run ``step``; returns float32 logits ``[decode rows + prefill rows, vocab]``: each
        decode row's next token, then each prefill row's token after its last prompt token."""
        d, p = len(step.decode_tokens), len(step.prefill_tokens)
        if d == 1 and not p:  # one sequence decoding: the step with the fewest ops per layer
            self.reserve(step.decode_lengths[0] + 1)
            return self.one_row(step.decode_tokens[0], step.decode_lengths[0], self.k, self.v)
        dev = self.device
        tokens = list(step.decode_tokens)
        positions = list(step.decode_lengths)
        slots = list(range(d))
        for j, (ids, start) in enumerate(zip(step.prefill_tokens, step.prefill_starts, strict=True)):
            tokens += ids
            positions += range(start, start + len(ids))
            slots += [d + j] * len(ids)
        ends = [n + 1 for n in step.decode_lengths] + [s + len(t) for s, t in zip(step.prefill_starts,
                                                                                  step.prefill_tokens, strict=True)]
        self.reserve(max(ends))
        pos_t = torch.tensor(positions, device=dev)
        slot_t = torch.tensor(slots, device=dev)
        # where each (token, kv head) row lands in a layer's buffer seen as [slots*kv_heads*capacity, head_dim]
        heads = torch.arange(self.kv_heads, device=dev)
        flat_t = ((slot_t[:, None] * self.kv_heads + heads[None, :]) * self.capacity + pos_t[:, None]).reshape(-1)
        cos, sin = self._cos[pos_t].unsqueeze(1), self._sin[pos_t].unsqueeze(1)  # [N, 1, D]
        decode_mask = prefill = None
        if d:  # additive mask [d, 1, 1, width]: -inf past each row's end (None when no row ends early)
            width = max(ends[:d])
            decode_mask = torch.zeros((d, 1, 1, width), dtype=self.dtype, device=dev)
            if min(ends[:d]) < width:
                past = torch.arange(width, device=dev)[None, :] >= torch.tensor(ends[:d], device=dev)[:, None]
                decode_mask.masked_fill_(past[:, None, None, :], float("-inf"))
        if p:
            prefill = self._prefill_layout(step, d, dev)
        x = self.inner.embed_tokens(torch.tensor(tokens, device=dev))  # [N, hidden]
        lin = self.linear
        for i, layer in enumerate(self.layers):
            h = rms_norm(layer.input_layernorm, x)
            x = self._attention(i, layer.self_attn, h, x, cos, sin, flat_t, d, decode_mask, prefill)
            x = mlp_residual(lin, layer.mlp, rms_norm(layer.post_attention_layernorm, x), x)
        last = list(range(d))
        offset = d
        for ids in step.prefill_tokens:
            offset += len(ids)
            last.append(offset - 1)
        h = rms_norm(self.inner.norm, x[torch.tensor(last, device=dev)] if len(last) < x.shape[0] else x)
        return self.linear(self.model.lm_head, x=h).float()

    def _prefill_layout(
        self, step: Step, d: int, dev: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor | None, int, int, int]:
        """Where each prefill token sits in a padded ``[rows, longest, ...]`` layout, and the
        causal mask ``[rows, 1, longest, width]`` — None for one row that starts at position
        0, where SDPA's own causal kernel (which skips the masked half) applies."""
        longest = max(len(t) for t in step.prefill_tokens)
        if len(step.prefill_tokens) == 1 and step.prefill_starts[0] == 0:
            return torch.arange(longest, device=dev), None, longest, longest, d
        dest: list[int] = []
        qpos = torch.full((len(step.prefill_tokens), longest), -1, dtype=torch.long)
        for j, (ids, start) in enumerate(zip(step.prefill_tokens, step.prefill_starts, strict=True)):
            dest += range(j * longest, j * longest + len(ids))
            qpos[j, : len(ids)] = torch.arange(start, start + len(ids))
        width = max(s + len(t) for s, t in zip(step.prefill_starts, step.prefill_tokens, strict=True))
        keys = torch.arange(width)
        mask = keys[None, None, :] <= qpos[:, :, None]  # [rows, longest, width]; padding rows see nothing
        mask[:, :, 0] |= qpos < 0  # ...except key 0, so their (discarded) softmax stays finite
        return torch.tensor(dest, device=dev), mask[:, None].to(dev), longest, width, d

    def _attention(self, i: int, attn: Any, h: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   flat_t: torch.Tensor, d: int, decode_mask: torch.Tensor | None,
                   prefill: tuple[torch.Tensor, torch.Tensor | None, int, int, int] | None) -> torch.Tensor:
        n, hd = h.shape[0], self.head_dim
        lin, nq, nk = self.linear, self.heads, self.kv_heads
        qkv = lin(attn.q_proj, attn.k_proj, attn.v_proj, x=h).view(n, nq + 2 * nk, hd)
        v = qkv[:, nq + nk:]
        if hasattr(attn, "q_norm"):
            qk = torch.cat((attn.q_norm(qkv[:, :nq]), attn.k_norm(qkv[:, nq:nq + nk])), dim=1)
        else:
            qk = qkv[:, : nq + nk]
        qk = qk * cos + _rotate_half(qk) * sin  # q and k heads rotated together
        q, k = qk[:, :nq], qk[:, nq:]
        kbuf, vbuf = self.k[i], self.v[i]
        kbuf.view(-1, hd).index_copy_(0, flat_t, k.reshape(-1, hd))
        vbuf.view(-1, hd).index_copy_(0, flat_t, v.reshape(-1, hd))
        out = q.new_empty(n, self.heads, hd)
        g, kvh = self.group, self.kv_heads
        if decode_mask is not None:
            # one query row per head: plain batched matmuls beat SDPA's kernel set-up at this size
            width = decode_mask.shape[-1]
            qd = q[:d].reshape(d, kvh, g, hd)  # the heads sharing a KV head as that head's query rows
            scores = torch.matmul(qd, kbuf[:d, :, :width].transpose(-1, -2)).mul_(attn.scaling).add_(decode_mask)
            o = torch.matmul(torch.softmax(scores, dim=-1), vbuf[:d, :, :width])
            out[:d] = o.reshape(d, self.heads, hd)
        if prefill is not None:
            # [rows, heads, longest, hd] queries on the rows' [kv heads, width] K/V: SDPA maps
            # query head h to KV head h // group itself (enable_gqa), no K/V copy per head
            dest, mask, longest, width, first = prefill
            rows = len(dest) // longest if mask is None else mask.shape[0]
            if mask is None:  # one row from position 0: no padding, plain causal attention
                qp = q[d:].unsqueeze(0)
            else:
                qp = q.new_zeros(rows * longest, self.heads, hd)
                qp[dest] = q[d:]
                qp = qp.view(rows, longest, self.heads, hd)
            o = F.scaled_dot_product_attention(qp.transpose(1, 2), kbuf[first:first + rows, :, :width],
                                               vbuf[first:first + rows, :, :width], attn_mask=mask,
                                               is_causal=mask is None, scale=attn.scaling, enable_gqa=True)
            o = o.transpose(1, 2).reshape(rows * longest, self.heads, hd)
            out[d:] = o if mask is None else o[dest]
        return lin.plus(attn.o_proj, out.view(n, self.heads * hd), x)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
