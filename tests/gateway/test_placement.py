"""ReplicaPlacement: a rollout sticks to its replica while it is healthy; new rollouts go
to the least loaded healthy one; a replica marked down is out for its cool-down, then due
for one probe; with all down, a 503 in the OpenAI error shape."""

from __future__ import annotations

import pytest

from agentbolt.gateway.placement import NoHealthyReplicaError, ReplicaPlacement


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_new_rollouts_go_to_the_replica_with_fewest_calls_in_flight() -> None:
    p = ReplicaPlacement(3)
    assert p.replica_for("a") == 0
    p.started(0)
    p.started(0)
    assert p.replica_for("b") == 1  # 0 is busy; 1 and 2 tie, lowest index
    p.started(1)
    assert p.replica_for("c") == 2
    p.finished(1)
    assert p.replica_for("d") == 1  # 1 and 2 idle, one rollout pinned each: lowest index
    assert [s["pinned"] for s in p.status()] == [1, 2, 1]
    assert [s["in_flight"] for s in p.status()] == [2, 0, 0]


def test_with_equal_load_the_replica_with_fewer_pinned_rollouts_wins() -> None:
    p = ReplicaPlacement(2)
    assert [p.replica_for(r) for r in ("a", "b", "c", "d")] == [0, 1, 0, 1]


def test_a_rollout_stays_on_its_replica_however_loaded() -> None:
    p = ReplicaPlacement(2)
    assert p.replica_for("a") == 0
    for _ in range(5):
        p.started(0)
    assert p.replica_for("a") == 0
    assert p.replica_for("b") == 1


def test_a_replica_marked_down_loses_its_rollouts_to_the_others_until_a_probe_brings_it_back() -> None:
    clock = Clock()
    p = ReplicaPlacement(3, cooldown_s=10.0, clock=clock)
    assert [p.replica_for(r) for r in ("a", "b", "c")] == [0, 1, 2]
    assert p.mark_down(1, "connection refused") is True
    assert not p.healthy(1)
    assert p.replica_for("b") == 0  # re-placed, and pinned there now
    assert p.replica_for("b") == 0
    assert [p.replica_for(r) for r in ("d", "e", "f")] == [2, 0, 2]
    down = p.status()[1]
    assert down["healthy"] is False and down["down_reason"] == "connection refused" and down["pinned"] == 0
    assert down["probe_in_s"] == 10.0 and down["failures"] == 1
    assert p.due_for_probe() == []
    clock.now += 10.0
    assert p.due_for_probe() == [1]
    assert p.due_for_probe() == []  # one probe at a time
    assert p.replica_for("g") != 1  # still out while being probed
    p.mark_up(1)
    assert p.healthy(1) and p.replica_for("h") == 1
    assert p.replica_for("b") == 0  # moved rollouts stay where they went


def test_a_failed_probe_starts_another_cool_down() -> None:
    clock = Clock()
    p = ReplicaPlacement(2, cooldown_s=5.0, clock=clock)
    p.mark_down(0, "refused")
    clock.now += 5.0
    assert p.due_for_probe() == [0]
    p.mark_down(0, "probe failed: refused")
    assert p.due_for_probe() == []
    clock.now += 5.0
    assert p.due_for_probe() == [0]
    assert p.status()[0]["failures"] == 2


def test_with_every_replica_down_the_call_gets_a_503_in_the_openai_shape() -> None:
    p = ReplicaPlacement(2)
    p.mark_down(0, "connection refused")
    p.mark_down(1, "HTTP 503")
    with pytest.raises(NoHealthyReplicaError) as err:
        p.replica_for("a")
    assert err.value.status_code == 503 and err.value.retryable and not err.value.replica_down
    error = err.value.body["error"]
    assert error["code"] == "no_healthy_replica" and error["type"] == "engine_unavailable"
    assert "all 2 engine replicas are down" in error["message"] and "replica 0: connection refused" in error["message"]


def test_a_single_replica_is_never_taken_out() -> None:
    p = ReplicaPlacement(1)
    assert p.mark_down(0, "refused") is False
    assert p.healthy(0) and p.replica_for("a") == 0


def test_the_oldest_pin_is_forgotten_past_max_rollouts() -> None:
    p = ReplicaPlacement(2, max_rollouts=2)
    assert [p.replica_for(r) for r in ("a", "b", "c")] == [0, 1, 0]  # "a" forgotten when "c" came
    assert [s["pinned"] for s in p.status()] == [1, 1]
