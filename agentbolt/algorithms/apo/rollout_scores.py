"""Reading scores off finished rollouts: which count, their mean, an evaluation table of them."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.evaluate import EvaluationResult
from agentbolt.algorithms.evaluate import evaluation_result as _evaluation_result
from agentbolt.types import Rollout, RolloutMode, RolloutStatus

__all__ = ["evaluation_result", "is_scored", "mean_or_none", "scored_reward"]


def is_scored(rollout: Rollout) -> bool:
    """A rollout counts in a score only if it succeeded and has a reward (failures are left out, not 0)."""
    return rollout.status == RolloutStatus.SUCCEEDED and rollout.reward is not None


def scored_reward(rollout: Rollout) -> float | None:
    """The rollout's reward when it counts in a score (:func:`is_scored`), else None."""
    return rollout.reward if is_scored(rollout) else None


async def evaluation_result(ctx: AlgorithmContext, rollouts: Sequence[Rollout], threshold: float) -> EvaluationResult:
    """The validation rollouts as an :class:`EvaluationResult` (see
    :func:`agentbolt.algorithms.evaluate.evaluation_result`)."""
    return await _evaluation_result(ctx, rollouts, mode=RolloutMode.VAL, threshold=threshold)


def mean_or_none(xs: Sequence[float]) -> float | None:
    """The mean, or None for no values."""
    return statistics.fmean(xs) if xs else None
