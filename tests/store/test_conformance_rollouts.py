"""Conformance: enqueueing, claiming and the rollout/attempt lifecycle through the public
Store API. Every backend must pass these exactly as the in-memory reference does."""

from __future__ import annotations

import asyncio

import pytest

from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidTransitionError, NotFoundError
from agentbolt.types import (
    AttemptStatus,
    ErrorInfo,
    JsonResource,
    RolloutConfig,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
    WorkerStatus,
)

A = AttemptStatus
R = RolloutStatus


# ---------------------------------------------------------------------------- enqueue
async def test_an_enqueued_rollout_is_queuing_with_no_attempts(store: Store) -> None:
    r = await store.enqueue_rollout({"question": "2+2?"})

    assert r.rollout_id
    assert r.status == R.QUEUING
    assert r.input == {"question": "2+2?"}
    assert r.attempt_count == 0
    assert r.latest_attempt_id is None
    assert r.start_time is None and r.end_time is None
    assert await store.get_rollout(r.rollout_id) == r
    assert await store.query_attempts(r.rollout_id) == []


async def test_enqueueing_many_returns_them_in_the_order_given(store: Store) -> None:
    rollouts = await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(5)])

    assert [r.input for r in rollouts] == [0, 1, 2, 3, 4]
    assert len({r.rollout_id for r in rollouts}) == 5
    stats = await store.stats()
    assert stats.total_rollouts == 5
    assert stats.queue_depth == 5


async def test_rollouts_are_claimed_in_the_order_they_were_enqueued(store: Store) -> None:
    first = [await store.enqueue_rollout(i) for i in range(3)]
    batch = await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(3, 7)])
    enqueued = [r.rollout_id for r in first + batch]

    claimed = [c.rollout.rollout_id for c in await store.claim_rollouts("w", limit=3)]
    while (c := await store.claim_rollout("w")) is not None:
        claimed.append(c.rollout.rollout_id)

    assert claimed == enqueued


async def test_enqueueing_the_same_rollout_id_twice_keeps_the_first(store: Store) -> None:
    first = await store.enqueue_rollout("first", rollout_id="task-1", metadata={"n": 1})
    again = await store.enqueue_rollout("second", rollout_id="task-1", metadata={"n": 2})

    assert again.rollout_id == first.rollout_id == "task-1"
    assert again.input == "first"
    assert again.metadata == {"n": 1}
    assert (await store.stats()).total_rollouts == 1
    assert await store.claim_rollout("w") is not None
    assert await store.claim_rollout("w") is None


async def test_a_rollout_id_repeated_within_one_batch_is_stored_once(store: Store) -> None:
    out = await store.enqueue_rollouts(
        [RolloutCreate(input="a", rollout_id="dup"), RolloutCreate(input="b", rollout_id="dup")]
    )

    assert [r.input for r in out] == ["a", "a"]
    assert (await store.stats()).total_rollouts == 1


async def test_re_enqueueing_a_claimed_rollout_returns_it_without_queuing_it_again(store: Store) -> None:
    await store.enqueue_rollout("x", rollout_id="task-1")
    claim = await store.claim_rollout("w")
    assert claim is not None

    again = await store.enqueue_rollout("x", rollout_id="task-1")

    assert again.status == R.PREPARING
    assert again.latest_attempt_id == claim.attempt.attempt_id
    assert await store.claim_rollout("w") is None


async def test_enqueueing_with_an_unknown_resources_version_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.enqueue_rollout("x", resources_version=1)
    await store.add_resources({"cfg": JsonResource(value=1)})
    with pytest.raises(NotFoundError):
        await store.enqueue_rollout("x", resources_version=2)

    ok = await store.enqueue_rollout("x", resources_version=1)

    assert ok.resources_version == 1
    assert (await store.stats()).total_rollouts == 1


async def test_input_config_metadata_and_mode_round_trip(store: Store) -> None:
    config = RolloutConfig(
        timeout_seconds=120.5, unresponsive_seconds=30.0, max_attempts=5, retry_on=[A.FAILED, A.TIMEOUT]
    )
    payload = {"prompt": "Grüß Gott — 你好 🚀", "nested": {"list": [1, 2.5, None, True, {"k": "v"}]}}
    metadata = {"task_id": "t-7", "tags": ["a", "b"], "deep": {"x": {"y": [1, {"z": "ü"}]}}}

    r = await store.enqueue_rollout(payload, mode=RolloutMode.VAL, config=config, metadata=metadata)
    claim = await store.claim_rollout("w")

    assert claim is not None
    for got in (r, await store.get_rollout(r.rollout_id), claim.rollout):
        assert got.input == payload
        assert got.mode == RolloutMode.VAL
        assert got.config == config
        assert got.metadata == metadata


# ---------------------------------------------------------------------------- claim
async def test_a_claim_returns_the_preparing_rollout_and_its_first_attempt(store: Store) -> None:
    r = await store.enqueue_rollout("x")

    claim = await store.claim_rollout("worker-1")

    assert claim is not None
    assert claim.rollout.rollout_id == r.rollout_id
    assert claim.rollout.status == R.PREPARING
    assert claim.rollout.attempt_count == 1
    assert claim.rollout.latest_attempt_id == claim.attempt.attempt_id
    assert claim.rollout.start_time is not None
    assert claim.attempt.rollout_id == r.rollout_id
    assert claim.attempt.sequence_id == 1
    assert claim.attempt.status == A.PREPARING
    assert claim.attempt.worker_id == "worker-1"
    assert await store.get_attempt(r.rollout_id, claim.attempt.attempt_id) == claim.attempt
    assert await store.query_attempts(r.rollout_id) == [claim.attempt]
    assert (await store.get_rollout(r.rollout_id)).status == R.PREPARING


async def test_claiming_from_an_empty_queue_returns_nothing(store: Store) -> None:
    assert await store.claim_rollouts("w") == []
    assert await store.claim_rollout("w") is None


async def test_a_claim_takes_at_most_limit_rollouts(store: Store) -> None:
    await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(5)])

    assert len(await store.claim_rollouts("w", limit=3)) == 3
    assert len(await store.claim_rollouts("w", limit=3)) == 2
    assert await store.claim_rollouts("w", limit=3) == []


async def test_retrying_a_claim_with_the_same_request_id_returns_the_same_claims(store: Store) -> None:
    await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(3)])

    first = await store.claim_rollouts("w", limit=2, request_id="req-1")
    retry = await store.claim_rollouts("w", limit=2, request_id="req-1")

    assert len(first) == 2
    assert [(c.rollout.rollout_id, c.attempt.attempt_id) for c in retry] == [
        (c.rollout.rollout_id, c.attempt.attempt_id) for c in first
    ]
    stats = await store.stats()
    assert stats.total_attempts == 2
    assert stats.queue_depth == 1
    rest = await store.claim_rollouts("w", limit=5)
    assert [c.rollout.input for c in rest] == [2]


async def test_a_claim_pins_the_latest_resources_version_when_the_rollout_had_none(store: Store) -> None:
    await store.add_resources({"cfg": JsonResource(value=1)})
    await store.add_resources({"cfg": JsonResource(value=2)})
    unpinned = await store.enqueue_rollout("x")
    pinned = await store.enqueue_rollout("y", resources_version=1)
    assert unpinned.resources_version is None

    claims = await store.claim_rollouts("w", limit=2)

    by_id = {c.rollout.rollout_id: c for c in claims}
    assert by_id[unpinned.rollout_id].rollout.resources_version == 2
    assert by_id[unpinned.rollout_id].attempt.resources_version == 2
    assert (await store.get_rollout(unpinned.rollout_id)).resources_version == 2
    assert by_id[pinned.rollout_id].rollout.resources_version == 1
    assert by_id[pinned.rollout_id].attempt.resources_version == 1


async def test_a_claim_without_any_resources_leaves_the_version_empty(store: Store) -> None:
    await store.enqueue_rollout("x")

    claim = await store.claim_rollout("w")

    assert claim is not None
    assert claim.rollout.resources_version is None
    assert claim.attempt.resources_version is None


async def test_a_claim_registers_the_worker_as_busy_on_its_attempt(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.get_worker("worker-1")
    r = await store.enqueue_rollout("x")

    claim = await store.claim_rollout("worker-1")

    assert claim is not None
    w = await store.get_worker("worker-1")
    assert w.status == WorkerStatus.BUSY
    assert w.current_rollout_id == r.rollout_id
    assert w.current_attempt_id == claim.attempt.attempt_id


async def test_a_worker_is_idle_again_once_its_attempt_finishes(store: Store) -> None:
    await store.enqueue_rollout("x")
    claim = await store.claim_rollout("worker-1")
    assert claim is not None

    await store.update_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id, status=A.SUCCEEDED)

    w = await store.get_worker("worker-1")
    assert w.status == WorkerStatus.IDLE
    assert w.current_rollout_id is None
    assert w.current_attempt_id is None


# ---------------------------------------------------------------------------- transitions
async def _claimed(store: Store, config: RolloutConfig | None = None) -> tuple[str, str]:
    """Enqueue one rollout and claim it; returns (rollout_id, attempt_id)."""
    r = await store.enqueue_rollout("x", config=config)
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == r.rollout_id
    return r.rollout_id, claim.attempt.attempt_id


async def test_a_heartbeat_moves_a_preparing_attempt_and_its_rollout_to_running(store: Store) -> None:
    rid, aid = await _claimed(store)

    first = await store.heartbeat(rid, aid)
    await asyncio.sleep(0.01)
    second = await store.heartbeat(rid, aid)

    assert first.status == second.status == A.RUNNING
    assert second.last_heartbeat_time >= first.last_heartbeat_time
    assert (await store.get_rollout(rid)).status == R.RUNNING


async def test_the_first_span_moves_a_preparing_attempt_and_its_rollout_to_running(store: Store) -> None:
    rid, aid = await _claimed(store)

    await store.add_span(Span(rollout_id=rid, attempt_id=aid, name="llm.call"))

    assert (await store.get_attempt(rid, aid)).status == A.RUNNING
    assert (await store.get_rollout(rid)).status == R.RUNNING


async def test_a_running_attempt_can_be_reported_running_explicitly(store: Store) -> None:
    rid, aid = await _claimed(store)

    att = await store.update_attempt(rid, aid, status=A.RUNNING)

    assert att.status == A.RUNNING
    assert (await store.get_rollout(rid)).status == R.RUNNING


async def test_reporting_success_finishes_the_attempt_and_the_rollout(store: Store) -> None:
    rid, aid = await _claimed(store)
    await store.heartbeat(rid, aid)

    att = await store.update_attempt(rid, aid, status=A.SUCCEEDED)

    assert att.status == A.SUCCEEDED
    assert att.end_time is not None
    r = await store.get_rollout(rid)
    assert r.status == R.SUCCEEDED
    assert r.end_time is not None
    assert (await store.stats()).queue_depth == 0


async def test_a_preparing_attempt_may_succeed_directly(store: Store) -> None:
    rid, aid = await _claimed(store)

    await store.update_attempt(rid, aid, status=A.SUCCEEDED)

    assert (await store.get_rollout(rid)).status == R.SUCCEEDED


async def test_reporting_failure_keeps_the_error_and_fails_the_rollout(store: Store) -> None:
    rid, aid = await _claimed(store)
    error = ErrorInfo(type="ValueError", message="bad answer ✗", traceback="Traceback...\n  line 1")

    att = await store.update_attempt(rid, aid, status=A.FAILED, error=error)

    assert att.status == A.FAILED
    assert att.error == error
    assert (await store.get_attempt(rid, aid)).error == error
    r = await store.get_rollout(rid)
    assert r.status == R.FAILED
    assert r.end_time is not None


async def test_re_sending_the_same_outcome_changes_nothing(store: Store) -> None:
    rid, aid = await _claimed(store)
    first = await store.update_attempt(rid, aid, status=A.SUCCEEDED)
    rollout_before = await store.get_rollout(rid)
    await asyncio.sleep(0.01)

    again = await store.update_attempt(rid, aid, status=A.SUCCEEDED)

    assert again.status == A.SUCCEEDED
    assert again.end_time == first.end_time
    assert await store.get_rollout(rid) == rollout_before


async def test_a_succeeded_attempt_cannot_fail_afterwards(store: Store) -> None:
    rid, aid = await _claimed(store)
    await store.update_attempt(rid, aid, status=A.SUCCEEDED)

    with pytest.raises(InvalidTransitionError):
        await store.update_attempt(rid, aid, status=A.FAILED)

    assert (await store.get_attempt(rid, aid)).status == A.SUCCEEDED
    assert (await store.get_rollout(rid)).status == R.SUCCEEDED


async def test_an_attempt_cannot_be_moved_back_to_preparing(store: Store) -> None:
    rid, aid = await _claimed(store)
    await store.heartbeat(rid, aid)

    with pytest.raises(InvalidTransitionError):
        await store.update_attempt(rid, aid, status=A.PREPARING)

    assert (await store.get_attempt(rid, aid)).status == A.RUNNING


# ---------------------------------------------------------------------------- cancel
async def _rollout_in(store: Store, status: RolloutStatus) -> str:
    """A rollout brought to ``status`` (queuing, preparing, running or requeuing)."""
    r = await store.enqueue_rollout("x", config=RolloutConfig(retry_on=[A.FAILED], max_attempts=3))
    if status == R.QUEUING:
        return r.rollout_id
    claim = await store.claim_rollout("w")
    assert claim is not None
    if status == R.RUNNING:
        await store.heartbeat(r.rollout_id, claim.attempt.attempt_id)
    elif status == R.REQUEUING:
        await store.update_attempt(r.rollout_id, claim.attempt.attempt_id, status=A.FAILED)
    assert (await store.get_rollout(r.rollout_id)).status == status
    return r.rollout_id


@pytest.mark.parametrize("status", [R.QUEUING, R.PREPARING, R.RUNNING, R.REQUEUING])
async def test_a_rollout_can_be_cancelled_from_any_live_status(store: Store, status: RolloutStatus) -> None:
    rid = await _rollout_in(store, status)
    attempts_before = await store.query_attempts(rid)

    r = await store.cancel_rollout(rid)

    assert r.status == R.CANCELLED
    assert r.end_time is not None
    assert (await store.get_rollout(rid)).status == R.CANCELLED
    assert await store.claim_rollout("w") is None
    assert (await store.stats()).queue_depth == 0
    attempts = await store.query_attempts(rid)
    assert len(attempts) == len(attempts_before)
    assert not any(a.status.is_active for a in attempts)
    if status in (R.PREPARING, R.RUNNING):
        assert attempts[-1].status == A.FAILED
        assert attempts[-1].error is not None and attempts[-1].error.type == "cancelled"


async def test_cancelling_a_cancelled_rollout_again_changes_nothing(store: Store) -> None:
    rid = await _rollout_in(store, R.QUEUING)
    first = await store.cancel_rollout(rid)

    again = await store.cancel_rollout(rid)

    assert again.status == R.CANCELLED
    assert again.end_time == first.end_time


@pytest.mark.parametrize("outcome", [A.SUCCEEDED, A.FAILED])
async def test_a_finished_rollout_cannot_be_cancelled(store: Store, outcome: AttemptStatus) -> None:
    rid, aid = await _claimed(store)
    await store.update_attempt(rid, aid, status=outcome)

    with pytest.raises(InvalidTransitionError):
        await store.cancel_rollout(rid)

    assert (await store.get_rollout(rid)).status == RolloutStatus(outcome.value)


@pytest.mark.parametrize("status", [R.PREPARING, R.RUNNING, R.REQUEUING, R.SUCCEEDED, R.FAILED])
async def test_update_rollout_can_set_no_status_but_cancelled(store: Store, status: RolloutStatus) -> None:
    r = await store.enqueue_rollout("x")

    with pytest.raises(InvalidTransitionError):
        await store.update_rollout(r.rollout_id, status=status)

    assert (await store.get_rollout(r.rollout_id)).status == R.QUEUING


async def test_a_cancelled_rollouts_attempt_learns_from_its_heartbeat_to_stop(store: Store) -> None:
    rid, aid = await _claimed(store)
    assert (await store.heartbeat(rid, aid)).status.is_active
    await store.cancel_rollout(rid)

    att = await store.heartbeat(rid, aid)

    assert not att.status.is_active
    assert (await store.get_rollout(rid)).status == R.CANCELLED


# ---------------------------------------------------------------------------- metadata & ids
async def test_update_rollout_merges_metadata(store: Store) -> None:
    r = await store.enqueue_rollout("x", metadata={"task": "t1", "keep": 1})

    await store.update_rollout(r.rollout_id, metadata={"score": 0.5})
    updated = await store.update_rollout(r.rollout_id, metadata={"task": "t2"})

    assert updated.metadata == {"task": "t2", "keep": 1, "score": 0.5}
    assert (await store.get_rollout(r.rollout_id)).metadata == updated.metadata
    assert updated.status == R.QUEUING


async def test_update_attempt_merges_metadata(store: Store) -> None:
    rid, aid = await _claimed(store)

    await store.update_attempt(rid, aid, metadata={"host": "node-1"})
    att = await store.update_attempt(rid, aid, metadata={"pid": 42})

    assert att.metadata == {"host": "node-1", "pid": 42}
    assert att.status == A.PREPARING
    assert (await store.get_attempt(rid, aid)).metadata == att.metadata


async def test_unknown_rollouts_and_attempts_are_not_found(store: Store) -> None:
    rid, aid = await _claimed(store)

    with pytest.raises(NotFoundError):
        await store.get_rollout("no-such-rollout")
    with pytest.raises(NotFoundError):
        await store.update_rollout("no-such-rollout", metadata={"a": 1})
    with pytest.raises(NotFoundError):
        await store.cancel_rollout("no-such-rollout")
    with pytest.raises(NotFoundError):
        await store.query_attempts("no-such-rollout")
    with pytest.raises(NotFoundError):
        await store.get_attempt(rid, "no-such-attempt")
    with pytest.raises(NotFoundError):
        await store.update_attempt(rid, "no-such-attempt", status=A.SUCCEEDED)
    with pytest.raises(NotFoundError):
        await store.heartbeat(rid, "no-such-attempt")
    with pytest.raises(NotFoundError):
        await store.heartbeat("no-such-rollout", aid)
    assert (await store.get_rollout(rid)).status == R.PREPARING
