"""Samples → padded tensors, in micro-batches that keep rollouts whole.

The loss is a mean over rollouts of per-rollout token means, so a micro-batch must hold
every sample of the rollouts it has: then its loss (a mean over its R_m rollouts) times
R_m / R is exactly its share of the batch loss, and gradient accumulation adds up to the
loss of the whole batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from agentbolt.algorithms.grpo.samples import Sample

__all__ = ["TrainBatch", "collate", "group_by_rollout", "micro_batches"]


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

    @property
    def num_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def to(self, device: torch.device) -> TrainBatch:
        return TrainBatch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.loss_mask,
                                                    self.old_logprobs, self.advantages, self.rollout_index)),
                          num_rollouts=self.num_rollouts)


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
    return TrainBatch(ids, attn, mask, old, adv, torch.tensor(index, dtype=torch.long), len(order))


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
