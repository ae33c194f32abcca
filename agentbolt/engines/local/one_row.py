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

__all__ = ["OneRowStep", "attend", "rotation_basis"]


def rotation_basis(head_dim: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``P`` with ``x @ P == rotate_half(x)`` (``[-x2, x1]``): the rotary embedding at a
    position with table rows ``cos``, ``sin`` is then ``x @ (diag(cos) + P * sin)``."""
    half = head_dim // 2
    basis = torch.zeros(head_dim, head_dim, dtype=dtype, device=device)
    idx = torch.arange(half, device=device)
    basis[idx + half, idx] = -1.0
    basis[idx, idx + half] = 1.0
    return basis


def attend(attn: Any, qkv: torch.Tensor, rotate: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
           k_all: torch.Tensor, v_all: torch.Tensor) -> torch.Tensor:
    """One row's attention output ``[1, q heads x head_dim]`` from its q, k, v heads ``qkv``
    (``[q heads + 2 x kv heads, head_dim]``): the rotary product ``rotate``, the new K/V
    written into ``k_new`` / ``v_new`` (``[kv heads, head_dim]``), SDPA over ``k_all`` /
    ``v_all`` (``[1, kv heads, positions, head_dim]``, the new position included)."""
    nk, hd = k_new.shape[0], qkv.shape[1]
    nq = qkv.shape[0] - 2 * nk
    qk = qkv[: nq + nk]
    if hasattr(attn, "q_norm"):  # Qwen3: RMSNorm per head before the rotary embedding
        qk = torch.cat((rms_norm(attn.q_norm, qk[:nq]), rms_norm(attn.k_norm, qk[nq:])))
    qk = torch.mm(qk, rotate)
    k_new.copy_(qk[nq:])
    v_new.copy_(qkv[nq + nk:])
    queries = qk[:nq].view(1, nk, nq // nk, hd)  # the query heads sharing a KV head as its query rows
    return F.scaled_dot_product_attention(queries, k_all, v_all, scale=attn.scaling).view(1, nq * hd)


class OneRowStep:
    """Decode one token for the row in KV slot 0 of ``k`` / ``v`` (``[layers, slots,
    kv_heads, capacity, head_dim]``); returns its float32 logits ``[1, vocab]``."""

    def __init__(self, model: Any, linear: PackedLinears, *, heads: int, kv_heads: int, head_dim: int,
                 cos: torch.Tensor, sin: torch.Tensor) -> None:
        self.model = model
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
        lin, nq, nk, hd = self.linear, self.heads, self.kv_heads, self.head_dim
        rotate = torch.addcmul(torch.diag(self.cos[length]), self.basis, self.sin[length])
        k_new, v_new = k[:, 0, :, length], v[:, 0, :, length]  # [layers, kv_heads, head_dim] views
        k_all, v_all = k[:, :1, :, : length + 1], v[:, :1, :, : length + 1]
        x = self.model.model.embed_tokens(torch.tensor([token], device=k.device))  # [1, hidden]
        for i, (norm_in, attn, norm_post, mlp) in enumerate(self.layers):
            qkv = lin(attn.q_proj, attn.k_proj, attn.v_proj, x=rms_norm(norm_in, x)).view(nq + 2 * nk, hd)
            x = lin.plus(attn.o_proj, attend(attn, qkv, rotate, k_new[i], v_new[i], k_all[i], v_all[i]), x)
            x = mlp_residual(lin, mlp, rms_norm(norm_post, x), x)
        return lin(self.model.lm_head, x=rms_norm(self.model.model.norm, x)).float()
