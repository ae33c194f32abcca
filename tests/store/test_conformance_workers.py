"""Conformance: workers, store statistics and the signing secret."""

from __future__ import annotations

import asyncio

import pytest

from agentbolt.store.base import Store
from agentbolt.store.errors import NotFoundError
from agentbolt.types import AttemptStatus, JsonResource, RolloutCreate, Span, WorkerStatus

A = AttemptStatus


async def test_update_worker_registers_a_worker_then_refreshes_it(store: Store) -> None:
    registered = await store.update_worker("runner-1", metadata={"host": "node-a"})
    await asyncio.sleep(0.02)

    refreshed = await store.update_worker("runner-1", status=WorkerStatus.BUSY, metadata={"gpus": 2})

    assert registered.status == WorkerStatus.IDLE
    assert registered.metadata == {"host": "node-a"}
    assert refreshed.created_at == registered.created_at
    assert refreshed.last_heartbeat_time > registered.last_heartbeat_time
    assert refreshed.status == WorkerStatus.BUSY
    assert refreshed.metadata == {"host": "node-a", "gpus": 2}
    assert await store.get_worker("runner-1") == refreshed


async def test_an_unknown_worker_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.get_worker("nobody")


async def test_query_workers_lists_every_known_worker(store: Store) -> None:
    assert await store.query_workers() == []
    await store.update_worker("b")
    await store.update_worker("a", status=WorkerStatus.OFFLINE)
    await store.enqueue_rollout("x")
    await store.claim_rollout("c")

    workers = {w.worker_id: w for w in await store.query_workers()}

    assert set(workers) == {"a", "b", "c"}
    assert workers["a"].status == WorkerStatus.OFFLINE
    assert workers["c"].status == WorkerStatus.BUSY


async def test_stats_of_an_empty_store_are_zero(store: Store) -> None:
    stats = await store.stats()

    assert stats.total_rollouts == stats.total_attempts == stats.total_spans == stats.total_workers == 0
    assert stats.queue_depth == 0
    assert sum(stats.rollouts_by_status.values()) == 0
    assert stats.latest_resources_version is None


async def test_stats_counts_add_up(store: Store) -> None:
    await store.add_resources({"cfg": JsonResource(value=1)})
    await store.add_resources({"cfg": JsonResource(value=2)})
    rollouts = await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(7)])
    ok, bad, busy = await store.claim_rollouts("w1", limit=3)
    await store.update_attempt(ok.rollout.rollout_id, ok.attempt.attempt_id, status=A.SUCCEEDED)
    await store.update_attempt(bad.rollout.rollout_id, bad.attempt.attempt_id, status=A.FAILED)
    await store.add_spans(
        [Span(rollout_id=busy.rollout.rollout_id, attempt_id=busy.attempt.attempt_id, name=f"s{i}") for i in range(4)]
    )
    await store.cancel_rollout(rollouts[6].rollout_id)
    await store.update_worker("w2")

    stats = await store.stats()

    assert {k: v for k, v in stats.rollouts_by_status.items() if v} == {
        "queuing": 3,
        "running": 1,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 1,
    }
    assert sum(stats.rollouts_by_status.values()) == stats.total_rollouts == 7
    assert {k: v for k, v in stats.attempts_by_status.items() if v} == {"succeeded": 1, "failed": 1, "running": 1}
    assert sum(stats.attempts_by_status.values()) == stats.total_attempts == 3
    assert stats.queue_depth == 3
    assert stats.total_spans == 4
    assert stats.total_workers == 2
    assert stats.latest_resources_version == 2


async def test_the_secret_is_stable_and_at_least_16_bytes(local_store: Store) -> None:
    """In-process backends only: the signing secret never leaves the server (least
    privilege), so ``HttpStore.get_secret`` refuses."""
    first = await local_store.get_secret()
    second = await local_store.get_secret()

    assert isinstance(first, bytes)
    assert len(first) >= 16
    assert first == second
