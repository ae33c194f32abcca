"""Conformance: many claimers never share a rollout, and ``wait_for_rollouts`` returns
as soon as the work it waits for is done."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from agentbolt.store.base import Store
from agentbolt.store.errors import NotFoundError
from agentbolt.types import AttemptStatus, RolloutCreate, RolloutStatus

A = AttemptStatus
R = RolloutStatus


async def _claim_until_empty(store: Store, worker_id: str) -> list[str]:
    """One claimer: take up to two rollouts at a time until the queue is empty."""
    taken: list[str] = []
    while claims := await store.claim_rollouts(worker_id, limit=2):
        taken.extend(c.rollout.rollout_id for c in claims)
        await asyncio.sleep(0)  # let the other claimers in between claims
    return taken


async def _assert_each_claimed_once(store: Store, ids: list[str], claimed: list[str]) -> None:
    counts = Counter(claimed)
    assert sorted(counts) == sorted(ids), "every rollout is claimed"
    assert [rid for rid, n in counts.items() if n > 1] == [], "no rollout is claimed twice"
    for rid in ids:
        attempts = await store.query_attempts(rid)
        assert len(attempts) == 1
        assert sum(a.status.is_active for a in attempts) == 1
    stats = await store.stats()
    assert stats.queue_depth == 0
    assert stats.total_attempts == len(ids)


async def test_60_rollouts_and_30_concurrent_claimers_give_each_rollout_one_attempt(store: Store) -> None:
    ids = [r.rollout_id for r in await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(60)])]

    results = await asyncio.gather(*(_claim_until_empty(store, f"w{i}") for i in range(30)))

    await _assert_each_claimed_once(store, ids, [rid for taken in results for rid in taken])


async def test_claimers_in_several_threads_each_with_its_own_event_loop_never_share_a_rollout(
    local_store: Store,
) -> None:
    ids = [r.rollout_id for r in await local_store.enqueue_rollouts([RolloutCreate(input=i) for i in range(60)])]

    def thread_main(t: int) -> list[str]:
        async def claimers() -> list[list[str]]:
            return await asyncio.gather(*(_claim_until_empty(local_store, f"t{t}-w{i}") for i in range(5)))

        return [rid for taken in asyncio.run(claimers()) for rid in taken]

    per_thread = await asyncio.gather(*(asyncio.to_thread(thread_main, t) for t in range(6)))

    await _assert_each_claimed_once(local_store, ids, [rid for taken in per_thread for rid in taken])


# ---------------------------------------------------------------------------- waiting
async def _finish(store: Store, rollout_id: str, attempt_id: str) -> None:
    await store.update_attempt(rollout_id, attempt_id, status=A.SUCCEEDED)


async def test_wait_for_rollouts_returns_them_in_the_order_asked_once_all_are_done(store: Store) -> None:
    rollouts = await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(3)])
    for c in await store.claim_rollouts("w", limit=3):
        await _finish(store, c.rollout.rollout_id, c.attempt.attempt_id)
    asked = [rollouts[2].rollout_id, rollouts[0].rollout_id, rollouts[1].rollout_id]

    done = await store.wait_for_rollouts(asked, timeout=5)

    assert [r.rollout_id for r in done] == asked
    assert all(r.status == R.SUCCEEDED for r in done)


async def test_wait_for_rollouts_counts_cancelled_and_failed_rollouts_as_done(store: Store) -> None:
    cancelled = await store.enqueue_rollout("c")
    failed = await store.enqueue_rollout("f")
    await store.cancel_rollout(cancelled.rollout_id)
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == failed.rollout_id
    await store.update_attempt(failed.rollout_id, claim.attempt.attempt_id, status=A.FAILED)

    done = await store.wait_for_rollouts([cancelled.rollout_id, failed.rollout_id], timeout=5)

    assert [r.status for r in done] == [R.CANCELLED, R.FAILED]


async def test_wait_for_rollouts_with_a_timeout_returns_only_the_finished_ones(store: Store) -> None:
    rollouts = await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(3)])
    claim = await store.claim_rollout("w")
    assert claim is not None
    await _finish(store, claim.rollout.rollout_id, claim.attempt.attempt_id)

    started = time.monotonic()
    done = await store.wait_for_rollouts([r.rollout_id for r in rollouts], timeout=0.3)
    elapsed = time.monotonic() - started

    assert [r.rollout_id for r in done] == [rollouts[0].rollout_id]
    assert 0.25 <= elapsed < 3.0


async def test_waiting_for_an_unknown_rollout_is_not_found(store: Store) -> None:
    r = await store.enqueue_rollout("x")

    with pytest.raises(NotFoundError):
        await store.wait_for_rollouts([r.rollout_id, "no-such-rollout"], timeout=0.1)


async def test_wait_for_rollouts_wakes_soon_after_another_task_finishes_the_last_one(store: Store) -> None:
    rollouts = await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(2)])
    claims = await store.claim_rollouts("w", limit=2)
    await _finish(store, claims[0].rollout.rollout_id, claims[0].attempt.attempt_id)
    finished_at: list[float] = []

    async def finish_later() -> None:
        await asyncio.sleep(0.5)
        await _finish(store, claims[1].rollout.rollout_id, claims[1].attempt.attempt_id)
        finished_at.append(time.monotonic())

    finisher = asyncio.create_task(finish_later())
    done = await store.wait_for_rollouts([r.rollout_id for r in rollouts], timeout=10)
    returned_at = time.monotonic()
    await finisher

    assert len(done) == 2
    assert returned_at - finished_at[0] < 0.5
