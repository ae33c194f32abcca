"""The maximum policy lag bound of async training."""

from __future__ import annotations

import pytest

from agentbolt.algorithms.grpo import Sample, policy_lag, split_stale


def sample(rollout_id: str, versions: list[int | None], mask: list[int] | None = None) -> Sample:
    n = len(versions)
    return Sample(rollout_id, "at-1", list(range(n)), mask or [1] * n, [-1.0] * n, versions, ["c"])


def test_lag_is_measured_from_the_oldest_trained_token() -> None:
    # trained tokens from versions 3 and 5 (the context token's None is ignored); at V = 6: lag = 6 - 3 = 3
    s = sample("ro-1", [None, 3, 5], mask=[0, 1, 1])
    assert policy_lag(s, 6) == 3
    assert policy_lag(sample("ro-2", [None, None]), 6) is None


def test_samples_within_the_bound_are_kept_and_a_stale_rollout_is_dropped_whole() -> None:
    # V = 10, max_lag = 2: ro-fresh lags 10-9 = 1 and 10-8 = 2 (kept, at the bound);
    # ro-old has one sample at lag 0 and one at 10-7 = 3 > 2 → both its samples go;
    # ro-unknown recorded no version: kept.
    samples = [
        sample("ro-fresh", [9]), sample("ro-fresh", [8, 9]),
        sample("ro-old", [10]), sample("ro-old", [7]),
        sample("ro-unknown", [None]),
    ]
    split = split_stale(samples, current_version=10, max_lag=2)
    assert [s.rollout_id for s in split.fresh] == ["ro-fresh", "ro-fresh", "ro-unknown"]
    assert split.stale_rollouts == ["ro-old"]
    assert split.max_lag == 2


def test_max_lag_zero_is_strictly_on_policy() -> None:
    split = split_stale([sample("a", [4]), sample("b", [5])], current_version=5, max_lag=0)
    assert ([s.rollout_id for s in split.fresh], split.stale_rollouts, split.max_lag) == (["b"], ["a"], 0)


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_lag must be >= 0"):
        split_stale([], current_version=1, max_lag=-1)
