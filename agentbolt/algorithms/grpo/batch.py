"""Samples → padded tensors, in micro-batches that keep rollouts whole.

The loss is a mean over rollouts of per-rollout token means, so a micro-batch must hold
every sample of the rollouts it has: then its loss (a mean over its R_m rollouts) times
R_m / R is exactly its share of the batch loss, and gradient accumulation adds up to the
loss of the whole batch.

Micro-batches follow the order of the samples, so the rollouts of one task's group —
which start with the same prompt — tend to share one; that common prefix then goes through
the model once (:func:`shared_prefix`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from agentbolt.adapters.samples import Sample

__all__ = ["MIN_SHARED_PREFIX", "TrainBatch", "collate", "group_by_rollout", "micro_batches", "shared_prefix"]


@dataclass(frozen=True, slots=True)
class TrainBatch:
    """``[N, T]`` right-padded tensors (and ``[N]`` per-sample ones) for one forward pass."""

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    rollout_index: Tensor
    """0..R_m−1: which of this batch's rollouts each sample belongs to."""
    num_rollouts: int
    shared_prefix: int = 0
    """Leading tokens identical in every row and trained in none (see :func:`shared_prefix`)."""

    @property
    def num_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def to(self, device: torch.device) -> TrainBatch:
        return TrainBatch(self.input_ids.to(device), self.attention_mask.to(device), self.loss_mask.to(device),
                          self.old_logprobs.to(device), self.advantages.to(device), self.rollout_index.to(device),
                          num_rollouts=self.num_rollouts, shared_prefix=self.shared_prefix)


def collate(samples: Sequence[Sample], pad_id: int = 0) -> TrainBatch:
    """Right-pad ``samples`` to their longest length."""
    if not samples:
        raise ValueError("collate needs at least one sample")
    T = max(len(s.token_ids) for s in samples)
    N = len(samples)
    ids = torch.full((N, T), pad_id, dtype=torch.long)
    attn = torch.zeros((N, T), dtype=torch.long)
    mask = torch.zeros((N, T), dtype=torch.float32)
    old = torch.zeros((N, T), dtype=torch.float32)
    order: dict[str, int] = {}
    index = []
    for n, s in enumerate(samples):
        L = len(s.token_ids)
        ids[n, :L] = torch.tensor(s.token_ids, dtype=torch.long)
        attn[n, :L] = 1
        mask[n, :L] = torch.tensor(s.loss_mask, dtype=torch.float32)
        old[n, :L] = torch.tensor(s.logprobs, dtype=torch.float32)
        index.append(order.setdefault(s.rollout_id, len(order)))
    adv = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    return TrainBatch(ids, attn, mask, old, adv, torch.tensor(index, dtype=torch.long), len(order),
                      shared_prefix(samples))


MIN_SHARED_PREFIX = 16
"""Shorter common prefixes are not worth a separate forward pass."""


def shared_prefix(samples: Sequence[Sample]) -> int:
    """P: the rows' first P + 1 tokens are identical and untrained, so the first P can go
    through the model once for all rows (0 when that is not worth it). The samples of one
    task's group share their whole first prompt: the system prompt, few-shot turns, question."""
    if len(samples) < 2:
        return 0
    first = samples[0].token_ids
    lcp = min(len(s.token_ids) for s in samples)
    for s in samples[1:]:
        ids = s.token_ids
        i = 0
        while i < lcp and ids[i] == first[i]:
            i += 1
        lcp = i
    first_trained = min((s.loss_mask.index(1) if 1 in s.loss_mask else len(s.loss_mask)) for s in samples)
    P = min(lcp, first_trained) - 1
    return P if P >= MIN_SHARED_PREFIX else 0


def group_by_rollout(samples: Sequence[Sample]) -> list[list[Sample]]:
    """Samples grouped by rollout, in order of first appearance."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.rollout_id, []).append(s)
    return list(groups.values())


def micro_batches(samples: Sequence[Sample], max_tokens: int) -> list[list[Sample]]:
    """Pack whole rollouts into micro-batches whose padded size (samples × longest)
    stays within ``max_tokens``; a rollout bigger than that gets a micro-batch alone."""
    out: list[list[Sample]] = []
    current: list[Sample] = []
    longest = 0
    for rollout in group_by_rollout(samples):
        r_longest = max(len(s.token_ids) for s in rollout)
        new_longest = max(longest, r_longest)
        if current and (len(current) + len(rollout)) * new_longest > max_tokens:
            out.append(current)
            current, new_longest = [], r_longest
        current = current + rollout
        longest = new_longest
    if current:
        out.append(current)
    return out
