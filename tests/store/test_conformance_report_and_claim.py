"""Conformance: ``report_and_claim`` — a worker reports an attempt's outcome and takes its
next rollouts in one call. Every backend must give what ``update_attempt`` followed by
``claim_rollouts`` gives."""

from __future__ import annotations

import asyncio

import pytest

from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError, InvalidTransitionError, NotFoundError
from agentbolt.types import AttemptStatus, ErrorInfo, RolloutConfig, RolloutCreate, RolloutStatus, WorkerStatus

A = AttemptStatus
R = RolloutStatus


async def test_the_report_is_stored_and_the_next_rollouts_are_claimed_in_queue_order(store: Store) -> None:
    ids = [r.rollout_id for r in await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(4)])]
    (first,) = await store.claim_rollouts("w", 1)

    done = await store.report_and_claim(
        first.rollout.rollout_id, first.attempt.attempt_id, status=A.SUCCEEDED, metadata={"k": 1},
        worker_id="w", limit=2,
    )

    assert done.attempt.attempt_id == first.attempt.attempt_id
    assert done.attempt.status == A.SUCCEEDED and done.attempt.metadata == {"k": 1}
    assert await store.get_attempt(first.rollout.rollout_id, first.attempt.attempt_id) == done.attempt
    assert (await store.get_rollout(ids[0])).status == R.SUCCEEDED
    assert [c.rollout.rollout_id for c in done.claims] == ids[1:3]
    for c in done.claims:
        assert c.rollout.status == R.PREPARING
        assert c.attempt.status == A.PREPARING and c.attempt.worker_id == "w" and c.attempt.sequence_id == 1
        assert await store.get_attempt(c.rollout.rollout_id, c.attempt.attempt_id) == c.attempt
    worker = await store.get_worker("w")
    assert worker.status == WorkerStatus.BUSY
    assert worker.current_rollout_id == ids[2] and worker.current_attempt_id == done.claims[-1].attempt.attempt_id
    assert (await store.stats()).queue_depth == 1


async def test_with_an_empty_queue_the_report_is_stored_and_nothing_is_claimed(store: Store) -> None:
    await store.enqueue_rollout("only")
    claim = await store.claim_rollout("w")
    assert claim is not None

    done = await store.report_and_claim(
        claim.rollout.rollout_id, claim.attempt.attempt_id, status=A.FAILED,
        error=ErrorInfo(type="ValueError", message="bad"), worker_id="w",
    )

    assert done.claims == []
    assert done.attempt.status == A.FAILED and done.attempt.error is not None
    assert (await store.get_rollout(claim.rollout.rollout_id)).status == R.FAILED
    worker = await store.get_worker("w")
    assert worker.status == WorkerStatus.IDLE and worker.current_attempt_id is None


async def test_the_report_comes_first_so_a_rollout_it_requeues_can_come_back(store: Store) -> None:
    retried = await store.enqueue_rollout("flaky", config=RolloutConfig(max_attempts=2))
    later = await store.enqueue_rollout("later")
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == retried.rollout_id

    done = await store.report_and_claim(
        retried.rollout_id, claim.attempt.attempt_id, status=A.FAILED,
        error=ErrorInfo(type="Flaky", message="try again", retryable=True), worker_id="w",
    )

    assert [c.rollout.rollout_id for c in done.claims] == [retried.rollout_id], "requeued before the later one"
    assert done.claims[0].attempt.sequence_id == 2
    assert (await store.get_rollout(later.rollout_id)).status == R.QUEUING


async def test_a_report_that_fails_claims_nothing(store: Store) -> None:
    await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(3)])
    claim = await store.claim_rollout("w")
    assert claim is not None
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    await store.update_attempt(rid, aid, status=A.SUCCEEDED)

    with pytest.raises(InvalidTransitionError):
        await store.report_and_claim(rid, aid, status=A.FAILED, worker_id="w")
    with pytest.raises(NotFoundError):
        await store.report_and_claim(rid, "no-such-attempt", status=A.SUCCEEDED, worker_id="w")
    with pytest.raises(InvalidRequestError):
        await store.report_and_claim(rid, aid, status=A.SUCCEEDED, worker_id="w", limit=0)

    stats = await store.stats()
    assert stats.queue_depth == 2 and stats.total_attempts == 1
    assert (await store.get_attempt(rid, aid)).status == A.SUCCEEDED


async def test_retrying_with_the_same_request_id_returns_the_same_claims_and_changes_nothing(store: Store) -> None:
    await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(3)])
    claim = await store.claim_rollout("w")
    assert claim is not None
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id

    first = await store.report_and_claim(rid, aid, status=A.SUCCEEDED, worker_id="w", request_id="next-1")
    again = await store.report_and_claim(rid, aid, status=A.SUCCEEDED, worker_id="w", request_id="next-1")

    assert [(c.rollout.rollout_id, c.attempt.attempt_id) for c in again.claims] == [
        (c.rollout.rollout_id, c.attempt.attempt_id) for c in first.claims
    ]
    assert again.attempt.status == A.SUCCEEDED and again.attempt.end_time == first.attempt.end_time
    stats = await store.stats()
    assert stats.total_attempts == 2 and stats.queue_depth == 1
    worker = await store.get_worker("w")
    assert worker.status == WorkerStatus.BUSY and worker.current_attempt_id == first.claims[0].attempt.attempt_id


async def test_many_workers_reporting_and_claiming_at_once_run_each_rollout_once(store: Store) -> None:
    rollouts = await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(40)])
    attempts: dict[str, list[str]] = {}

    async def worker(k: int) -> int:
        done = 0
        claims = await store.claim_rollouts(f"w{k}", 1)
        while claims:
            c = claims[0]
            attempts.setdefault(c.rollout.rollout_id, []).append(c.attempt.attempt_id)
            nxt = await store.report_and_claim(
                c.rollout.rollout_id, c.attempt.attempt_id, status=A.SUCCEEDED, worker_id=f"w{k}"
            )
            claims = nxt.claims
            done += 1
        return done

    counts = await asyncio.gather(*(worker(k) for k in range(8)))

    assert sum(counts) == 40
    assert sorted(attempts) == sorted(r.rollout_id for r in rollouts)
    assert all(len(a) == 1 for a in attempts.values()), "each rollout claimed exactly once"
    stats = await store.stats()
    assert stats.rollouts_by_status.get(R.SUCCEEDED) == 40 and stats.queue_depth == 0
    assert all(w.status == WorkerStatus.IDLE for w in await store.query_workers())
