"""Rewards given after a group's rollouts have all finished: the seam GRPO calls.

A :class:`GroupReward` (a :class:`~agentbolt.rewards.judge.GroupJudge`, a
:class:`~agentbolt.rewards.judge.RubricJudge`, or your own) scores the rollouts of one
task's group, writes the rewards into the store as reward spans of their latest attempts
and returns the rollouts read again. GRPO calls :func:`score_groups` on each step's groups
right after they complete and before advantages are computed
(``GRPO(config, group_reward=...)``), so the advantages are those of the judge's scores.

A group whose scoring fails (the judge's endpoint is down, its answer is malformed) is
not trained on in that step: its rollouts keep what they had, the failure is recorded on
them and counted (``judge/failed_groups``), and the first error of each kind is logged.
Every group of a step failing stops the run with that error (failures speak).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentbolt.rewards.judge.errors import JudgeError
from agentbolt.store.base import Store
from agentbolt.types import Rollout

__all__ = ["GroupReward", "GroupScoring", "NoGroupScoredError", "score_groups"]

log = logging.getLogger("agentbolt.rewards")


class GroupReward(Protocol):
    """Scores one group of finished rollouts (the G rollouts of one task)."""

    @property
    def name(self) -> str:
        """The reward it writes."""
        ...

    async def score_group(self, store: Store, rollouts: Sequence[Rollout]) -> list[Rollout]:
        """Write the rewards of ``rollouts`` into ``store`` and return them read again, in
        order; raise a :class:`~agentbolt.rewards.judge.JudgeError` when it cannot."""
        ...


class NoGroupScoredError(JudgeError):
    """Every group of a step failed to be scored: the judge is not working."""


@dataclass
class GroupScoring:
    """What :func:`score_groups` did."""

    groups: list[list[Rollout]] = field(default_factory=list)
    """The groups that were scored (in order), their rollouts read again."""
    kept: list[int] = field(default_factory=list)
    """Their indexes among the groups given."""
    failures: list[tuple[int, JudgeError]] = field(default_factory=list)
    """``(index, error)`` of the groups that were not."""

    def metrics(self) -> dict[str, float]:
        total = len(self.groups) + len(self.failures)
        return {"judge/scored_groups": float(len(self.groups)), "judge/failed_groups": float(len(self.failures)),
                "judge/failed_fraction": len(self.failures) / total if total else 0.0}


_logged: set[str] = set()


async def score_groups(store: Store, reward: GroupReward, groups: Sequence[Sequence[Rollout]], *,
                       concurrency: int = 4) -> GroupScoring:
    """Score ``groups`` with ``reward`` (``concurrency`` groups at a time). Raises
    :class:`NoGroupScoredError` when there were groups and none could be scored."""
    slots = asyncio.Semaphore(concurrency)

    async def one(rollouts: Sequence[Rollout]) -> list[Rollout]:
        async with slots:
            return await reward.score_group(store, rollouts)

    results = await asyncio.gather(*(one(g) for g in groups), return_exceptions=True)
    out = GroupScoring()
    for index, result in enumerate(results):
        if isinstance(result, JudgeError):
            out.failures.append((index, result))
            kind = type(result).__name__
            if kind not in _logged:
                _logged.add(kind)
                log.warning("a group was left out of training, its %s reward failed: %s", reward.name, result)
        elif isinstance(result, BaseException):
            raise result
        else:
            out.groups.append(result)
            out.kept.append(index)
    if groups and not out.groups:
        first = out.failures[0][1]
        raise NoGroupScoredError(f"no group of this step could be scored by the {reward.name} reward; the first "
                                 f"failure: {first}") from first
    return out
