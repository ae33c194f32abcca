"""Tolerances for comparing two float computations of the same math in different orders.

Two evaluations of one sum that add its ``n`` terms in different orders (a batched matmul
against a sliced one, a shared prefix run once against once per row, micro-batches
against one batch) round differently. Each element's error is bounded by ``n·u·Σ|xᵢ|``
(Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2; u = eps/2), and since
rounding errors are independent with mean zero their sum grows like ``√n·u`` in practice:
``|error| ≤ λ·√n·u·Σ|xᵢ|`` with probability at least ``1 − 2·exp(−λ²/2)`` (Higham & Mary,
"A new approach to probabilistic rounding error analysis", SIAM J. Sci. Comput. 2019).

The terms' scale ``Σ|xᵢ|`` is not known from the result: a gradient element is a sum over
positions whose terms cancel, so one element can be 1e-4 while its terms are 1e-1. We use
the largest magnitude in the compared tensor as that scale (every element of a weight's
gradient sums terms of that size), and λ = 12, for which the bound fails with probability
below 1e-31 per element: the comparison then fails on a real difference (a wrong prefix,
a lost token: errors of 1e-2 and more, relative) and never on a busy machine's different
thread split. An element-wise ``atol=1e-6`` instead was a coin toss: under load one of
1,024 gradient elements of a test differed by 1.08e-6 (relative 2.7e-3) from an identical
computation; measured here, the fast and full paths differ by at most 6.8e-7 of the
largest gradient element (5.7 eps) over 40 loaded runs.
"""

from __future__ import annotations

import math

import torch

LAMBDA = 12.0


def reduction_atol(want: torch.Tensor, terms: int, dtype: torch.dtype = torch.float32) -> float:
    """Absolute tolerance for ``want`` recomputed with its ``terms``-long sums reordered."""
    unit_roundoff = torch.finfo(dtype).eps / 2
    scale = float(want.detach().abs().max()) if want.numel() else 0.0
    return LAMBDA * math.sqrt(max(terms, 1)) * unit_roundoff * scale


def assert_same_sums(got: torch.Tensor, want: torch.Tensor, terms: int, dtype: torch.dtype = torch.float32) -> None:
    """``got`` equals ``want`` up to the rounding of ``terms``-long sums in ``dtype`` (see module doc)."""
    torch.testing.assert_close(got, want, rtol=0.0, atol=reduction_atol(want, terms, dtype))
