"""The pieces of a Llama-shaped layer that the ragged step and the one-row step share:
RMSNorm as one op, and the MLP with its residual add."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from agentbolt.engines.local.packed_linear import PackedLinears

__all__ = ["mlp_residual", "rms_norm"]


def rms_norm(module: Any, x: torch.Tensor) -> torch.Tensor:
    """``module(x)``: as one ``F.rms_norm`` call when ``module`` is the standard RMSNorm
    (weight x x / rms, fp32), else the module itself (its Python code runs ~6 ops)."""
    eps = getattr(module, "variance_epsilon", None)  # third-party: model layouts vary
    if eps is not None and type(module).__name__.endswith("RMSNorm") and x.dtype == torch.float32:
        return F.rms_norm(x, (x.shape[-1],), module.weight, eps)
    return module(x)


def mlp_residual(linear: PackedLinears, mlp: Any, h: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """``residual + down(act(gate(h)) * up(h))``, gate and up as one GEMM."""
    inter = mlp.gate_proj.weight.shape[0]
    gate_up = linear(mlp.gate_proj, mlp.up_proj, x=h)
    return linear.plus(mlp.down_proj, mlp.act_fn(gate_up[:, :inter]) * gate_up[:, inter:], residual)
