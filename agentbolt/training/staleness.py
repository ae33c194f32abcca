"""Maximum policy lag: which samples are too stale to train on (GRPO's async schedule, and any
trainer that trains on tokens an engine sampled while it trained).

A token sampled by policy version v and trained at version V has lag V − v. The async
schedule keeps sampling while it trains, so lag grows; the importance weight corrects a
small lag (:mod:`agentbolt.algorithms.grpo.loss`), and ``max_lag`` bounds it. A rollout is the unit: if any of
its trained tokens lags more than ``max_lag``, all its samples are dropped — keeping
part of a rollout would change its per-rollout normalisation. Tokens whose version was
not recorded (an engine that reports none) are trusted as fresh.

With a :class:`~.versions.VersionLineage` the lag is counted in updates, and a rollout
with a token of a version the lineage does not hold (weights lost in a crash, or newer
than the trainer's) is dropped too: its lag is unknown, and a negative one would pass as
fresh and skip the importance correction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agentbolt.adapters.samples import Sample
from agentbolt.training.versions import VersionLineage

__all__ = ["StalenessSplit", "policy_lag", "split_stale"]


def policy_lag(sample: Sample, current_version: int) -> int | None:
    """V − (oldest version among the sample's trained tokens); None when not recorded."""
    oldest = sample.oldest_version
    return None if oldest is None else current_version - oldest


@dataclass(frozen=True, slots=True)
class StalenessSplit:
    """The samples kept for training and the rollouts dropped as too stale."""

    fresh: list[Sample]
    stale_rollouts: list[str]
    max_lag: int | None
    """The largest lag among the kept samples (None: no version recorded)."""
    unknown_rollouts: list[str] = field(default_factory=list)
    """Rollouts with tokens of versions whose weights the trainer does not hold (dropped)."""


def split_stale(samples: Sequence[Sample], current_version: int, max_lag: int, *,
                lineage: VersionLineage | None = None) -> StalenessSplit:
    """Keep the samples of rollouts whose every token lags at most ``max_lag`` versions
    (updates, with a ``lineage``; its unknown versions are dropped as ``unknown_rollouts``)."""
    if max_lag < 0:
        raise ValueError(f"max_lag must be >= 0 (0: train only on the current policy's tokens), got {max_lag}")
    unknown: set[str] = set()
    if lineage is None:
        lags = {id(s): policy_lag(s, current_version) for s in samples}
        unknown = {s.rollout_id for s in samples if (lag := lags[id(s)]) is not None and lag < 0}  # newer weights
    else:
        lags = {}
        for s in samples:
            versions = {v for v, m in zip(s.versions, s.loss_mask, strict=True) if m and v is not None}
            per_token = [lineage.lag(v, current_version) for v in versions]
            if any(lag is None or lag < 0 for lag in per_token):
                unknown.add(s.rollout_id)
            lags[id(s)] = max((lag for lag in per_token if lag is not None), default=None)
    stale = {s.rollout_id for s in samples if (lag := lags[id(s)]) is not None and lag > max_lag} - unknown
    fresh = [s for s in samples if s.rollout_id not in stale and s.rollout_id not in unknown]
    kept = [lag for s in fresh if (lag := lags[id(s)]) is not None]
    return StalenessSplit(fresh, sorted(stale), max(kept) if kept else None, sorted(unknown))
