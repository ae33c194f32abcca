"""One GRPO policy update on a batch of samples (with advantages already set).

Per optimizer pass (``ppo_epochs`` of them):

1. split the batch's rollouts over data-parallel ranks (:mod:`.distributed`), then into
   micro-batches of whole rollouts, a rollout over ``micro_batch_tokens`` split between
   its samples (:mod:`agentbolt.training.batch`);
2. per micro-batch: logprobs under π_θ at the trained positions only (the output layer
   runs on those alone; each task's shared prompt runs once: :mod:`agentbolt.training.logprobs`),
   the loss of :func:`.loss.grpo_loss` normalised with each rollout's whole |T_r| and the
   batch's R — its exact share of the batch loss — backward: the gradients add up to
   those of the loss of the whole batch;
3. sum gradients over ranks, clip their global norm, step AdamW. A sharded policy
   (``sharding="fsdp"``, :mod:`agentbolt.training.fsdp`) has FSDP's reduce-scatter sum
   them instead, and every rank runs as many forwards and backwards as the busiest one.

Before the first pass, ``prox_logprobs`` (π_θ at the start of the update, no dropout)
are computed for samples drawn by an older policy version, so their ratio is clipped
around the current policy and the gap to the sampling policy is importance-weighted
(truncated); ``ref_logprobs`` (the LoRA off) only when the KL is used or logged.

``recompute_old``: the engine computes in another dtype or on another device than the
trainer, so even fresh samples' engine logprobs are not the trainer's π_θ for the same
weights (bf16 vs fp32: |Δ| ≈ 0.03 on average). Then π_prox is computed for every sample:
the ratio starts at exactly 1 and the clip acts on the update alone, while
w = min(π_prox / π_behav, C) weighs the behaviour policy's numerical mismatch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from agentbolt.adapters.samples import Sample
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.loss import grpo_loss
from agentbolt.training import distributed as dist
from agentbolt.training import fsdp
from agentbolt.training.batch import (
    TrainBatch,
    collate,
    group_by_rollout,
    micro_batches,
    trained_tokens,
)
from agentbolt.training.policy import Policy

__all__ = ["PolicyUpdate", "UpdateStats"]


@dataclass(frozen=True, slots=True)
class UpdateStats:
    """Token-weighted means over the batch (all ranks), and sizes."""

    loss: float
    clip_fraction: float
    """Tokens whose clip is active (verl's ``pg_clipfrac``, TRL's ``clip_ratio``)."""
    ratio_outside_fraction: float
    """Tokens whose ratio lay outside the clip range, whatever the advantage's sign."""
    dual_clip_fraction: float
    ratio_mean: float
    importance_weight_mean: float
    kl: float | None
    entropy: float | None
    grad_norm: float
    num_samples: int
    num_rollouts: int
    num_trained_tokens: int
    num_tokens: int
    seconds: float
    stale_samples: int

    @property
    def tokens_per_second(self) -> float:
        return self.num_tokens * 1.0 / self.seconds if self.seconds > 0 else 0.0

    def as_metrics(self, prefix: str = "train/") -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {f"{prefix}{k}": v for k, v in asdict(self).items()}
        out[f"{prefix}tokens_per_second"] = self.tokens_per_second
        return out


class PolicyUpdate:
    """The optimizer and the update step for ``policy``."""

    def __init__(self, policy: Policy, config: GRPOConfig, *, recompute_old: bool | None = None) -> None:
        self.policy = policy
        self.config = config
        self.recompute_old = bool(config.recompute_old_logprobs if recompute_old is None else recompute_old)
        params = policy.trainable_parameters()
        if not params:
            raise ValueError("the policy has no trainable parameters")
        self.optimizer = torch.optim.AdamW(params, lr=config.learning_rate, weight_decay=config.weight_decay,
                                           betas=config.adam_betas)
        self.steps = 0

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state and the update count; a sharded policy's optimizer state
        is not in it (every rank checkpoints its shards: :func:`~agentbolt.training.fsdp.save_sharded`)."""
        if self.policy.sharded:
            return {"steps": self.steps}
        return {"optimizer": self.optimizer.state_dict(), "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back what :meth:`state_dict` returned (the optimizer's state when it holds it)."""
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])

    def step(self, samples: Sequence[Sample], *, current_version: int | None = None) -> UpdateStats:
        """Update the policy on ``samples`` (every rank passes the same full list)."""
        cfg, policy = self.config, self.policy
        t0 = time.perf_counter()
        policy.model.train()  # dropout on for π_θ (π_prox and π_ref are computed without)
        rollouts = [r for r in group_by_rollout(samples) if any(s.num_response_tokens for s in r)]
        if not rollouts:
            raise ValueError("no sample has a trained token: nothing to update on")
        R = len(rollouts)
        mine = [s for r in dist.shard(rollouts) for s in r]
        groups = micro_batches(mine, cfg.micro_batch_tokens) if mine else []
        tokens = trained_tokens(samples)
        batches = [collate(mb, policy.pad_id, tokens).to(policy.device) for mb in groups]
        stale = {id(s) for s in mine if _is_stale(s, current_version)}
        want_ref = cfg.kl_coef > 0 or cfg.log_kl
        # π_prox for micro-batches holding a sample of an older policy; with several passes
        # the policy moves between them, so always
        wants_prox = [self.recompute_old or cfg.ppo_epochs > 1 or any(id(s) in stale for s in mb) for mb in groups]
        # sharded, FSDP gathers weights in every forward: as many on every rank, in the same order
        fill_prox, fill_ref, fill_train = fsdp.filler_passes(sum(wants_prox), len(batches) * want_ref, len(batches)) \
            if policy.sharded else (0, 0, 0)
        share = not policy.sharded  # a shared prefix is one forward more, on some ranks only
        proxs = [self._extras(b, wanted, False, share)[0] for b, wanted in zip(batches, wants_prox, strict=True)]
        _fill(policy, fill_prox, policy.inference_logprobs)
        refs = [self._extras(b, False, want_ref, share)[1] for b in batches]
        _fill(policy, fill_ref, policy.reference_logprobs)
        extras = list(zip(proxs, refs, strict=True))

        totals = _Totals()
        grad_norm = 0.0
        params = policy.trainable_parameters()
        for epoch in range(cfg.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=False)
            last = epoch == cfg.ppo_epochs - 1
            for batch, (prox, ref) in zip(batches, extras, strict=True):
                lp, ent = policy.token_logprobs(batch.input_ids, batch.attention_mask, with_entropy=last,
                                                **_forward_args(batch, share))
                out = grpo_loss(lp, batch.old_logprobs, batch.advantages, batch.loss_mask, batch.rollout_index,
                                prox_logprobs=prox, ref_logprobs=ref, entropy=ent, eps_low=cfg.eps_low,
                                eps_high=cfg.eps_high, clip_ratio_c=cfg.clip_ratio_c, is_cap=cfg.is_cap,
                                kl_coef=cfg.kl_coef, loss_norm=cfg.loss_norm, norm_tokens=cfg.loss_norm_tokens or 1.0,
                                rollout_tokens=batch.rollout_tokens, num_rollouts=R)
                out.loss.backward()  # already this micro-batch's share of the batch loss
                if last:
                    totals.add(out, batch)
            if policy.sharded:  # FSDP reduce-scatters (sums) in each backward
                _fill(policy, fill_train, _zero_backward(policy))
                grad_norm = fsdp.grad_norm(params, cfg.max_grad_norm)
                self.optimizer.step()
                continue
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            dist.all_reduce_sum(grads)
            for p, g in zip(params, grads, strict=True):
                p.grad = g
            if cfg.max_grad_norm is not None:
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
            else:
                grad_norm = float(torch.sqrt(sum(((g.float() ** 2).sum() for g in grads), torch.zeros(()))))
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.steps += 1
        return totals.stats(R, grad_norm, time.perf_counter() - t0, len(stale))

    def _extras(
        self, batch: TrainBatch, stale_rows: bool, want_ref: bool, share: bool = True
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """π_prox (``stale_rows``) and π_ref (``want_ref``) of one micro-batch, or None."""
        prox = ref = None
        if stale_rows:
            prox = self.policy.inference_logprobs(batch.input_ids, batch.attention_mask, **_forward_args(batch, share))
        if want_ref:
            ref = self.policy.reference_logprobs(batch.input_ids, batch.attention_mask, **_forward_args(batch, share))
        return prox, ref


def _forward_args(batch: TrainBatch, share: bool = True) -> dict[str, Any]:
    """Logprobs at the trained positions only (the loss masks the rest), shared prompts once."""
    if not share:
        return {"positions": batch.loss_mask}
    return {"shared_prefix": batch.shared_prefix, "prefix_group": batch.prefix_group,
            "positions": batch.loss_mask}


def _fill(policy: Policy, passes: int, forward: Any) -> None:
    """``passes`` forwards of ``forward`` on a two-token row that trains nothing (a
    sharded policy's rank with fewer micro-batches than another)."""
    ids = torch.full((1, 2), policy.pad_id, dtype=torch.long, device=policy.device)
    for _ in range(passes):
        forward(ids, torch.ones_like(ids), positions=torch.tensor([[0, 1]], device=policy.device))


def _zero_backward(policy: Policy) -> Any:
    """A forward and backward whose gradient is 0: a micro-batch this rank does not have."""
    def run(input_ids: torch.Tensor, attention_mask: torch.Tensor, *, positions: torch.Tensor) -> None:
        lp, _ = policy.token_logprobs(input_ids, attention_mask, positions=positions)
        (lp.sum() * 0.0).backward()
    return run


def _is_stale(sample: Sample, version: int | None) -> bool:
    """Was ``sample`` drawn by a policy older than ``version``?"""
    return version is not None and sample.oldest_version is not None and sample.oldest_version < version


class _Totals:
    """Token-weighted sums of the loss statistics, summed over ranks at the end."""

    FIELDS = ("loss", "clip", "outside", "dual", "ratio", "w", "kl", "ent", "n", "samples", "tokens", "has_kl")

    def __init__(self) -> None:
        self.v = torch.zeros(len(self.FIELDS), dtype=torch.float64)

    def add(self, out: Any, batch: TrainBatch) -> None:
        n = float(batch.loss_mask.sum())
        self.v += torch.tensor([
            float(out.loss.detach()), out.clip_fraction * n, out.ratio_outside_fraction * n,
            out.dual_clip_fraction * n, out.ratio_mean * n, out.importance_weight_mean * n, (out.kl or 0.0) * n,
            (out.entropy or 0.0) * n, n, batch.input_ids.shape[0], batch.num_tokens,
            1.0 if out.kl is not None else 0.0,
        ], dtype=torch.float64)

    def stats(self, R: int, grad_norm: float, seconds: float, stale: int) -> UpdateStats:
        v = self.v.clone()
        extra = torch.tensor([float(stale)], dtype=torch.float64)
        dist.all_reduce_sum([v, extra])
        f = dict(zip(self.FIELDS, v.tolist(), strict=True))
        n = max(f["n"], 1.0)
        return UpdateStats(
            loss=f["loss"],
            clip_fraction=f["clip"] / n,
            ratio_outside_fraction=f["outside"] / n,
            dual_clip_fraction=f["dual"] / n,
            ratio_mean=f["ratio"] / n,
            importance_weight_mean=f["w"] / n,
            kl=f["kl"] / n if f["has_kl"] > 0 else None,
            entropy=f["ent"] / n if f["n"] > 0 else None,
            grad_norm=grad_norm if math.isfinite(grad_norm) else float("nan"),
            num_samples=int(f["samples"]),
            num_rollouts=R,
            num_trained_tokens=int(f["n"]),
            num_tokens=int(f["tokens"]),
            seconds=seconds,
            stale_samples=int(extra.item()),
        )
