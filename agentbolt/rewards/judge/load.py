"""The finished rollouts a judge can score, read back from the store as trajectories."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from agentbolt.rewards.judge.record import Placement
from agentbolt.rewards.judge.trajectory import Trajectory
from agentbolt.store.base import Store
from agentbolt.types import Rollout, RolloutStatus

__all__ = ["Judged", "judgeable", "load_trajectories"]


@dataclass(frozen=True, slots=True)
class Judged:
    """A rollout to judge: its trajectory and where the judge's spans go."""

    rollout: Rollout
    trajectory: Trajectory
    where: Placement


def judgeable(rollout: Rollout) -> bool:
    """Succeeded rollouts only: a failed or cancelled one is an infrastructure failure
    (or a program's crash) and stays out of training; a judge does not score it."""
    return rollout.status == RolloutStatus.SUCCEEDED and rollout.latest_attempt_id is not None


async def load_trajectories(store: Store, rollouts: Sequence[Rollout]) -> list[Judged]:
    """The judgeable ``rollouts`` with their latest attempt's trajectory, in order."""
    chosen = [r for r in rollouts if judgeable(r)]

    async def one(r: Rollout) -> Judged:
        assert r.latest_attempt_id is not None  # judgeable
        spans = await store.get_spans(r.rollout_id, r.latest_attempt_id)
        return Judged(r, Trajectory.from_spans(r.rollout_id, spans, task=r.input),
                      Placement.of(r.rollout_id, r.latest_attempt_id, spans))

    return list(await asyncio.gather(*(one(r) for r in chosen)))
