"""The GRPO policy loss, normalised per rollout.

Shapes: ``[N, T]`` for N padded samples of T tokens, where ``logprobs[n, t]`` is
log π(token t | tokens < t) (the caller shifts the logits) and ``loss_mask`` is 1 on the
trained (response) tokens; ``advantages`` is ``[N]`` (one A per sample, its rollout's);
``rollout_index`` is ``[N]`` with values 0..R−1 saying which rollout each sample is from.

Per token, with π_behav the sampling-time policy (``old_logprobs``):

    ρ_t = π_θ / π_old                          (π_old = π_behav, or π_prox when given)
    w_t = min(π_prox / π_behav, C)             truncated importance weight, detached;
                                               1 when no ``prox_logprobs`` are given
    ℓ_t = −w_t · min(ρ_t A, clip(ρ_t, 1 − ε_low, 1 + ε_high) A) + β · KL_t
    KL_t = exp(q_t) − q_t − 1,  q_t = log π_ref − log π_θ     (k3 estimator, ≥ 0)

``prox_logprobs`` are the trainer's own logprobs under the weights at the start of the
update: pass them when the policy has moved since sampling (async, stale samples) so the
ratio is clipped around the proximal policy and the gap to the behaviour policy is
corrected by the capped weight w_t (decoupled PPO / truncated IS).

Loss = (1/R) Σ_r (1/|T_r|) Σ_{t ∈ T_r} ℓ_t, with T_r every trained token of every
sample of rollout r: each rollout weighs the same whatever its number of calls and tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["GRPOLossOutput", "grpo_loss", "per_rollout_mean"]


@dataclass(frozen=True, slots=True)
class GRPOLossOutput:
    """The loss to backpropagate and detached statistics for logging (token means)."""

    loss: Tensor
    clip_fraction: float
    """Share of trained tokens whose ratio ρ_t lay outside [1 − ε_low, 1 + ε_high]."""
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
    is_cap: float = 2.0,
    kl_coef: float = 0.0,
) -> GRPOLossOutput:
    """The GRPO loss (see module doc); ``entropy`` ``[N, T]`` is only logged."""
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
    mask = loss_mask.to(logprobs.dtype)
    A = advantages.to(logprobs.dtype).unsqueeze(-1)
    if prox_logprobs is None:
        log_old, w = old_logprobs.detach(), torch.ones_like(logprobs)
    else:
        log_old = prox_logprobs.detach()
        w = torch.exp(log_old - old_logprobs.detach()).clamp(max=is_cap)
    rho = torch.exp(logprobs - log_old)
    surrogate = torch.minimum(rho * A, rho.clamp(1.0 - eps_low, 1.0 + eps_high) * A)
    per_token = -w * surrogate
    kl = None
    if ref_logprobs is not None:
        q = ref_logprobs - logprobs
        kl = torch.exp(q) - q - 1.0
        if kl_coef:
            per_token = per_token + kl_coef * kl
    loss = per_rollout_mean(per_token, mask, rollout_index)

    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)

        def token_mean(x: Tensor) -> float:
            return float((x * mask).sum() / n)

        clipped = ((rho < 1.0 - eps_low) | (rho > 1.0 + eps_high)).to(mask.dtype)
        return GRPOLossOutput(
            loss=loss,
            clip_fraction=token_mean(clipped),
            ratio_mean=token_mean(rho),
            importance_weight_mean=token_mean(w),
            kl=None if kl is None else token_mean(kl),
            entropy=None if entropy is None else token_mean(entropy),
            num_rollouts=int(torch.unique(rollout_index[mask.sum(-1) > 0]).numel()),
        )
