"""Rollout-level GRPO advantages over the group of rollouts of one task.

For the G rollouts of a task with rewards r_1..r_G the baseline of rollout i is the
group mean μ = (1/G) Σ_j r_j, or with ``leave_one_out`` the mean of the *others*
b_i = (Σ_j r_j − r_i) / (G − 1) (RLOO), and

    A_i = (r_i − b_i)            or, with ``scale_std``,   A_i = (r_i − b_i) / (σ + ε)

with σ the population standard deviation of the group's rewards. A group whose rewards
are all equal has A_i = 0 for everyone: it carries no signal, so it is dropped (and
counted) rather than diluting the batch. Rollouts that failed for infrastructure
reasons never enter a group. The rollout's A_i is copied to each of its samples.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentbolt.adapters.samples import Sample
from agentbolt.types import Rollout, RolloutStatus

__all__ = ["Advantages", "GroupMember", "apply_advantages", "compute_advantages", "group_advantages"]

EQUAL_TOL = 1e-9
"""Rewards closer than this count as equal."""


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One rollout of a task's group: its reward, or ``failed`` (infrastructure: no reward to learn from)."""

    rollout_id: str
    reward: float | None
    failed: bool = False

    @classmethod
    def from_rollout(cls, rollout: Rollout) -> GroupMember:
        """A finished rollout; failed or cancelled ones, and ones without a reward, are ``failed``."""
        failed = rollout.status in (RolloutStatus.FAILED, RolloutStatus.CANCELLED) or rollout.reward is None
        return cls(rollout.rollout_id, rollout.reward, failed)


@dataclass(frozen=True, slots=True)
class Advantages:
    """A_i per rollout id, for the groups that carried signal."""

    by_rollout: dict[str, float]
    dropped_groups: int
    """Groups whose (non-failed) rewards were all equal, or that had fewer than 2 rollouts."""
    failed_rollouts: int


def group_advantages(
    rewards: Sequence[float], *, scale_std: bool = False, leave_one_out: bool = False, eps: float = 1e-6
) -> list[float] | None:
    """A_i for one group's rewards, or None when they are all equal (no signal)."""
    G = len(rewards)
    if G < 2 or max(rewards) - min(rewards) <= EQUAL_TOL:
        return None
    mu = sum(rewards) / G
    if leave_one_out:
        total = sum(rewards)
        A = [r - (total - r) / (G - 1) for r in rewards]
    else:
        A = [r - mu for r in rewards]
    if scale_std:
        sigma = math.sqrt(sum((r - mu) ** 2 for r in rewards) / G)
        A = [a / (sigma + eps) for a in A]
    return A


def compute_advantages(
    groups: Mapping[str, Sequence[GroupMember]], *, scale_std: bool = False, leave_one_out: bool = False,
    eps: float = 1e-6,
) -> Advantages:
    """A_i for every rollout of ``groups`` (task id → its rollouts), leaving out failed
    rollouts and the groups without signal."""
    by_rollout: dict[str, float] = {}
    dropped = failed = 0
    for members in groups.values():
        ok = [m for m in members if not m.failed and m.reward is not None]
        failed += len(members) - len(ok)
        rewards = [float(m.reward) for m in ok if m.reward is not None]
        A = group_advantages(rewards, scale_std=scale_std, leave_one_out=leave_one_out, eps=eps)
        if A is None:
            dropped += 1
            continue
        by_rollout.update({m.rollout_id: a for m, a in zip(ok, A, strict=True)})
    return Advantages(by_rollout, dropped, failed)


def apply_advantages(samples: Sequence[Sample], advantages: Advantages) -> list[Sample]:
    """Each sample with its rollout's A_i; samples of rollouts without one (dropped
    groups, failed rollouts) are left out."""
    A = advantages.by_rollout
    return [dataclasses.replace(s, advantage=A[s.rollout_id]) for s in samples if s.rollout_id in A]
