"""The decode step of a single row (one sequence, one new token), in few ops per layer.

Why a path of its own: at one row every weight matrix is a matrix-vector product, and
the ~35 small ops per layer of the ragged step (index lists, masks, the rotary halves,
separate adds) and oneDNN's cost per call took ~13 ms of CPU per step for SmolLM2-135M's
30 layers (measured with its matrices shrunk to nothing), ~5 ms here, beside ~40 ms of
reading the weights. Here each layer is: RMSNorm, the q/k/v product, the rotary
embedding as one product with a rotation matrix built once per step for the row's
position, the new K/V copied into the cache, attention over the row's cached positions
(no mask: all of them are visible), ``o_proj`` with the residual add in the same call,
RMSNorm, the gate/up product, the activation and their product, ``down_proj`` with the
residual add in the same call (:class:`.packed_linear.PackedLinears`).

The step runs its ops on one intra-op thread (``threads``), whatever torch's thread count:
at one row a product is bound by memory bandwidth, which a second core adds little to on
this repository's machine (one thread streams 18-21 GB/s, two 23-27 GB/s), while each of
torch's parallel regions pays a barrier (with 2 threads a step took 7-29 % more CPU and,
in 7 of 8 rounds, 10-35 % more wall time: ``benchmarks/one_row_step.py``).

The math is the ragged step's (:class:`.llama_forward.RaggedLlama`), in a different
order of float operations: logits agree to rounding, and the K/V written here are the
ones the ragged step reads later.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from agentbolt.engines.local.blocks import mlp_residual, rms_norm
from agentbolt.engines.local.packed_linear import PackedLinears

__all__ = ["OneRowStep", "rotation_basis"]


def rotation_basis(head_dim: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``P`` with ``x @ P == rotate_half(x)`` (``[-x2, x1]``): the rotary embedding at a
    position with table rows ``cos``, ``sin`` is then ``x @ (diag(cos) + P * sin)``."""
    half = head_dim // 2
    basis = torch.zeros(head_dim, head_dim, dtype=dtype, device=device)
    idx = torch.arange(half, device=device)
    basis[idx + half, idx] = -1.0
    basis[idx, idx + half] = 1.0
    return basis


class OneRowStep:
    """Decode one token for the row in KV slot 0 of ``k`` / ``v`` (``[layers, slots,
    kv_heads, capacity, head_dim]``); returns its float32 logits ``[1, vocab]``."""

    def __init__(self, model: Any, linear: PackedLinears, *, heads: int, kv_heads: int, head_dim: int,
                 cos: torch.Tensor, sin: torch.Tensor, threads: int | None = 1) -> None:
        self.model = model
        self.threads = threads  # torch's intra-op threads for the step's ops (None: the caller's)
        self.linear = linear
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.group = heads // kv_heads
        self.cos, self.sin = cos, sin  # [max_len, head_dim]: the model's own rotary table
        self.basis = rotation_basis(head_dim, cos.dtype, cos.device)
        # the modules of each layer, looked up once (a weight swap writes into them in place)
        self.layers = [(layer.input_layernorm, layer.self_attn, layer.post_attention_layernorm, layer.mlp)
                       for layer in model.model.layers]

    def __call__(self, token: int, length: int, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``token`` goes to position ``length`` (the positions before are cached in slot 0)."""
        threads = torch.get_num_threads()
        if self.threads is None or self.threads == threads:
            return self._step(token, length, k, v)
        torch.set_num_threads(self.threads)
        try:
            return self._step(token, length, k, v)
        finally:
            torch.set_num_threads(threads)

    def _step(self, token: int, length: int, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        lin, nq, nk, hd = self.linear, self.heads, self.kv_heads, self.head_dim
        rotate = torch.addcmul(torch.diag(self.cos[length]), self.basis, self.sin[length])
        k_new, v_new = k[:, 0, :, length], v[:, 0, :, length]  # [layers, kv_heads, head_dim] views
        k_all, v_all = k[:, :1, :, : length + 1], v[:, :1, :, : length + 1]
        queries = (1, nk, self.group, hd)  # the query heads sharing a KV head as its query rows
        x = self.model.model.embed_tokens(torch.tensor([token], device=k.device))  # [1, hidden]
        for i, (norm_in, attn, norm_post, mlp) in enumerate(self.layers):
            qkv = lin(attn.q_proj, attn.k_proj, attn.v_proj, x=rms_norm(norm_in, x)).view(nq + 2 * nk, hd)
            qk = qkv[: nq + nk]
            if hasattr(attn, "q_norm"):  # Qwen3: RMSNorm per head before the rotary embedding
                qk = torch.cat((rms_norm(attn.q_norm, qk[:nq]), rms_norm(attn.k_norm, qk[nq:])))
            qk = torch.mm(qk, rotate)
            k_new[i].copy_(qk[nq:])
            v_new[i].copy_(qkv[nq + nk:])
            o = F.scaled_dot_product_attention(qk[:nq].view(queries), k_all[i], v_all[i], scale=attn.scaling)
            x = lin.plus(attn.o_proj, o.view(1, nq * hd), x)
            x = mlp_residual(lin, mlp, rms_norm(norm_post, x), x)
        return lin(self.model.lm_head, x=rms_norm(self.model.model.norm, x)).float()
