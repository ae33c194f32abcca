"""Rollout-level GRPO advantages: hand-computed for small groups."""

from __future__ import annotations

import math

import pytest

from agentbolt.algorithms.grpo import (
    GroupMember,
    Sample,
    apply_advantages,
    compute_advantages,
    group_advantages,
)
from agentbolt.types import Rollout, RolloutStatus


def sample(rollout_id: str, n_tokens: int = 1) -> Sample:
    return Sample(rollout_id, "at-1", [1] * n_tokens, [1] * n_tokens, [-1.0] * n_tokens, [0] * n_tokens, ["c"])


def test_mean_centred() -> None:
    # r = [1, 0.5, 0]: μ = 1.5/3 = 0.5 → A = [0.5, 0, -0.5]
    assert group_advantages([1.0, 0.5, 0.0]) == pytest.approx([0.5, 0.0, -0.5])


def test_std_scaled() -> None:
    # σ = sqrt(((0.5)² + 0² + (-0.5)²) / 3) = sqrt(1/6) = 0.408248 → A = [1.224745, 0, -1.224745]
    sigma = math.sqrt(1 / 6)
    A = group_advantages([1.0, 0.5, 0.0], scale_std=True, eps=0.0)
    assert A == pytest.approx([0.5 / sigma, 0.0, -0.5 / sigma]) and A[0] == pytest.approx(1.224745, abs=1e-6)


def test_leave_one_out() -> None:
    # Σr = 1.5; b_1 = (1.5 - 1)/2 = 0.25, b_2 = (1.5 - 0.5)/2 = 0.5, b_3 = 1.5/2 = 0.75
    # A = [1 - 0.25, 0.5 - 0.5, 0 - 0.75] = [0.75, 0, -0.75]
    assert group_advantages([1.0, 0.5, 0.0], leave_one_out=True) == pytest.approx([0.75, 0.0, -0.75])


def test_a_group_whose_rewards_are_all_equal_is_dropped_and_counted() -> None:
    groups = {
        "task-same": [GroupMember("ro-1", 1.0), GroupMember("ro-2", 1.0), GroupMember("ro-3", 1.0)],
        "task-diff": [GroupMember("ro-4", 1.0), GroupMember("ro-5", 0.0)],
    }
    adv = compute_advantages(groups)
    # only task-diff carries signal: μ = 0.5 → A = ±0.5
    assert adv.by_rollout == pytest.approx({"ro-4": 0.5, "ro-5": -0.5})
    assert (adv.dropped_groups, adv.failed_rollouts) == (1, 0)


def test_failed_rollouts_are_never_in_a_group() -> None:
    # if the failed rollout counted as reward 0: μ = 1/3 and A(ro-1) = 2/3. Left out: μ = 0.5.
    groups = {"t": [GroupMember("ro-1", 1.0), GroupMember("ro-2", 0.0), GroupMember("ro-3", None, failed=True)]}
    adv = compute_advantages(groups)
    assert adv.by_rollout == pytest.approx({"ro-1": 0.5, "ro-2": -0.5})
    assert adv.failed_rollouts == 1 and "ro-3" not in adv.by_rollout


def test_a_group_left_with_one_rollout_has_no_signal() -> None:
    groups = {"t": [GroupMember("ro-1", 1.0), GroupMember("ro-2", 0.3, failed=True)]}
    adv = compute_advantages(groups)
    assert adv.by_rollout == {} and (adv.dropped_groups, adv.failed_rollouts) == (1, 1)


def test_the_rollout_advantage_is_copied_to_each_sample_whatever_the_sample_count() -> None:
    # ro-a made 3 samples, ro-b 1. Per rollout: μ = (1 + 0)/2 = 0.5 → A_a = 0.5, A_b = -0.5
    # (a per-sample baseline would give μ = (1+1+1+0)/4 = 0.75 and A_a = 0.25: not what GRPO means).
    samples = [sample("ro-a"), sample("ro-a", 5), sample("ro-a"), sample("ro-b"), sample("ro-dropped")]
    adv = compute_advantages({"t": [GroupMember("ro-a", 1.0), GroupMember("ro-b", 0.0)]})
    out = apply_advantages(samples, adv)
    assert [(s.rollout_id, s.advantage) for s in out] == [("ro-a", 0.5), ("ro-a", 0.5), ("ro-a", 0.5), ("ro-b", -0.5)]


def test_members_from_store_rollouts() -> None:
    ok = Rollout(rollout_id="ro-1", status=RolloutStatus.SUCCEEDED, reward=0.0)
    crashed = Rollout(rollout_id="ro-2", status=RolloutStatus.FAILED, reward=None)
    assert GroupMember.from_rollout(ok) == GroupMember("ro-1", 0.0, failed=False)
    assert GroupMember.from_rollout(crashed).failed
