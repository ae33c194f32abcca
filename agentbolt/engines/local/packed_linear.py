"""Linear layers on weight copies laid out for the kernel that runs them fastest.

Why: decoding on a CPU is reading the weights, and which kernel streams them fastest
depends on the rows. Measured on the AVX-512 CPU of this repository (AMD EPYC, torch
2.13, one thread, SmolLM2-135M's shapes):

* two rows or more: oneDNN on weights pre-packed for its GEMM kernels is 1.5-2.5x
  torch's default (MKL on the ``[out, in]`` weight).
* one row (a matrix-vector product): oneDNN's fixed cost per call (~15-40 µs, against
  ~2 µs for MKL) is a tenth of a decode step, and MKL on a transposed ``[in, out]`` copy
  reads the weights faster than either on the ``[out, in]`` layout (a long contiguous
  stream per input element: q/k/v 14.9 vs 11.5 GB/s, gate 17.5 vs 13.2, the 49,152-row
  output head 25 vs 15) — where the output is longer than the input. ``o_proj`` and
  ``down_proj`` (output no longer than the input) run on the model's own weight, with
  the residual add in the same MKL call.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["PackedLinears"]

_Stamp = tuple[tuple[int, int], ...]
_Entry = tuple[torch.Tensor, torch.Tensor | None, _Stamp]


class PackedLinears:
    """``x @ W.T + b`` for Hugging Face ``Linear`` modules, on laid-out weight copies.

    The copies cost memory: the oneDNN copy of every weight (made the first time a layer
    runs on two rows or more) and the transposed copy of the weights whose output is
    longer than their input (made the first time it runs on one row): for SmolLM2-135M
    538 MB and 392 MB beside the model's own 538 MB. A copy is remade when its weight
    changes: torch bumps a tensor's version counter at every in-place write, so a weight
    swap, a LoRA merge or a trainer's optimizer step on a shared model is seen at the next
    call. Without oneDNN (or for other dtypes/devices, or an inference-mode weight, which
    has no version counter to trust a copy by) every method computes the same with plain
    ops on the model's weights.
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled and torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn,
                                                                                     "_linear_pointwise")
        self._packed: dict[tuple[int, ...], _Entry] = {}
        self._transposed: dict[tuple[int, ...], _Entry] = {}

    def __call__(self, *modules: Any, x: torch.Tensor) -> torch.Tensor:
        """The outputs of ``modules`` on ``x`` side by side, from one GEMM (q/k/v together)."""
        if x.shape[0] == 1:
            t = self._copy(modules, self._transposed)
            if t is not None:
                return torch.mm(x, t[0]) if t[1] is None else torch.addmm(t[1], x, t[0])
        else:
            entry = self._copy(modules, self._packed)
            if entry is not None:
                return torch.ops.mkldnn._linear_pointwise(x, entry[0], entry[1], "none", [], "")
        outs = [F.linear(x, m.weight, m.bias) for m in modules]
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)

    def plus(self, module: Any, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """``residual + module(x)`` (a new tensor); at one row the add is in the GEMM call."""
        if x.shape[0] > 1 or module.bias is not None:
            return residual + self(module, x=x)
        t = self._copy((module,), self._transposed)
        return torch.addmm(residual, x, module.weight.t() if t is None else t[0])

    def _copy(self, modules: tuple[Any, ...], kind: dict[tuple[int, ...], _Entry]) -> _Entry | None:
        """The ``kind`` copy (oneDNN-packed or transposed) of the weights of ``modules``
        side by side, with their bias; remade when any weight changed. None where the
        plain ops on the model's weights apply (and for a transposed copy of a weight
        whose output is not longer than its input)."""
        weights = [m.weight for m in modules]
        w0 = weights[0]
        if not self.enabled or w0.dtype != torch.float32 or w0.device.type != "cpu":
            return None
        if kind is self._transposed and sum(w.shape[0] for w in weights) <= w0.shape[1]:
            return None
        try:
            stamp = tuple((w._version, w.data_ptr()) for w in weights)
        except RuntimeError:  # an inference-mode tensor has no version counter: nothing to trust a copy by
            return None
        key = tuple(id(m) for m in modules)
        entry = kind.get(key)
        if entry is None or entry[2] != stamp:
            w = torch.cat([w.detach() for w in weights]) if len(weights) > 1 else w0.detach()
            biases = [m.bias for m in modules]
            bias = None
            if any(b is not None for b in biases):
                bias = torch.cat([b.detach() if b is not None else w0.new_zeros(m.weight.shape[0])
                                  for b, m in zip(biases, modules, strict=True)])
            laid = w.t().contiguous() if kind is self._transposed else torch.ops.mkldnn._reorder_linear_weight(w, 16)
            entry = (laid, bias, stamp)
            kind[key] = entry
        return entry
