"""Conformance: retries, timeouts and unresponsive attempts are the store's job.

Deadlines here are 0.2–0.5 s and the stores check them every 0.02 s; observations poll
the store for up to 3 s (see the ``eventually`` fixture), so a loaded machine is slow
but not flaky.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidTransitionError
from agentbolt.types import AttemptStatus, Claim, ErrorInfo, Rollout, RolloutConfig, RolloutStatus, Span

A = AttemptStatus
R = RolloutStatus

Eventually = Callable[..., Awaitable[Any]]


async def _enqueue_and_claim(store: Store, config: RolloutConfig) -> Claim:
    await store.enqueue_rollout("x", config=config)
    claim = await store.claim_rollout("w")
    assert claim is not None
    return claim


async def _status_becomes(store: Store, eventually: Eventually, rollout_id: str, status: RolloutStatus) -> Rollout:
    rollout: Rollout = await eventually(lambda: store.get_rollout(rollout_id), lambda r: r.status == status)
    return rollout


# ---------------------------------------------------------------------------- agent failures
async def test_a_failure_not_listed_in_retry_on_fails_the_rollout(store: Store) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(max_attempts=3))  # retry_on: timeout, unresponsive
    rid = claim.rollout.rollout_id

    await store.update_attempt(rid, claim.attempt.attempt_id, status=A.FAILED, error=ErrorInfo(message="wrong"))

    r = await store.get_rollout(rid)
    assert r.status == R.FAILED
    assert r.attempt_count == 1
    assert await store.claim_rollout("w") is None


async def test_a_retryable_error_requeues_the_rollout_for_a_second_attempt(store: Store) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(max_attempts=3))
    rid, first = claim.rollout.rollout_id, claim.attempt.attempt_id
    error = ErrorInfo(type="ConnectionError", message="engine went away", retryable=True)

    await store.update_attempt(rid, first, status=A.FAILED, error=error)

    assert (await store.get_rollout(rid)).status == R.REQUEUING
    assert (await store.stats()).queue_depth == 1
    again = await store.claim_rollout("w2")
    assert again is not None
    assert again.rollout.rollout_id == rid
    assert again.rollout.status == R.PREPARING
    assert again.rollout.attempt_count == 2
    assert again.rollout.latest_attempt_id == again.attempt.attempt_id != first
    assert again.attempt.sequence_id == 2
    assert again.attempt.worker_id == "w2"
    attempts = await store.query_attempts(rid)
    assert [(a.sequence_id, a.status) for a in attempts] == [(1, A.FAILED), (2, A.PREPARING)]
    assert attempts[0].error == error


async def test_a_non_retryable_error_fails_the_rollout_even_with_tries_left(store: Store) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(max_attempts=3))
    rid = claim.rollout.rollout_id

    await store.update_attempt(rid, claim.attempt.attempt_id, status=A.FAILED, error=ErrorInfo(retryable=False))

    assert (await store.get_rollout(rid)).status == R.FAILED


async def test_retry_on_failed_requeues_every_agent_failure(store: Store) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(retry_on=[A.FAILED], max_attempts=3))
    rid = claim.rollout.rollout_id

    await store.update_attempt(rid, claim.attempt.attempt_id, status=A.FAILED)

    assert (await store.get_rollout(rid)).status == R.REQUEUING
    again = await store.claim_rollout("w")
    assert again is not None and again.attempt.sequence_id == 2


async def test_the_rollout_fails_once_max_attempts_are_used_up(store: Store) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(retry_on=[A.FAILED], max_attempts=2))
    rid = claim.rollout.rollout_id
    await store.update_attempt(rid, claim.attempt.attempt_id, status=A.FAILED)
    second = await store.claim_rollout("w")
    assert second is not None

    await store.update_attempt(rid, second.attempt.attempt_id, status=A.FAILED, error=ErrorInfo(retryable=True))

    r = await store.get_rollout(rid)
    assert r.status == R.FAILED
    assert r.attempt_count == 2
    assert r.end_time is not None
    assert await store.claim_rollout("w") is None


async def test_a_requeued_rollout_is_claimed_before_rollouts_enqueued_after_it(store: Store) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(retry_on=[A.FAILED]))
    later = await store.enqueue_rollout("later")

    await store.update_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id, status=A.FAILED)

    again = await store.claim_rollout("w")
    assert again is not None
    assert again.rollout.rollout_id == claim.rollout.rollout_id
    nxt = await store.claim_rollout("w")
    assert nxt is not None and nxt.rollout.rollout_id == later.rollout_id


# ---------------------------------------------------------------------------- deadlines
async def test_an_attempt_past_its_timeout_is_retried_and_can_then_complete(
    store: Store, eventually: Eventually
) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(timeout_seconds=0.3, max_attempts=2))
    rid = claim.rollout.rollout_id
    await store.heartbeat(rid, claim.attempt.attempt_id)

    await _status_becomes(store, eventually, rid, R.REQUEUING)

    first = await store.get_attempt(rid, claim.attempt.attempt_id)
    assert first.status == A.TIMEOUT
    assert first.end_time is not None
    assert first.error is not None and first.error.type == "timeout"
    again = await store.claim_rollout("w")
    assert again is not None and again.attempt.sequence_id == 2
    await store.update_attempt(rid, again.attempt.attempt_id, status=A.SUCCEEDED)
    r = await store.get_rollout(rid)
    assert r.status == R.SUCCEEDED
    assert r.attempt_count == 2


async def test_a_timed_out_attempt_that_reports_late_is_rejected(store: Store, eventually: Eventually) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(timeout_seconds=0.2))
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    await _status_becomes(store, eventually, rid, R.REQUEUING)

    with pytest.raises(InvalidTransitionError):
        await store.update_attempt(rid, aid, status=A.SUCCEEDED)

    assert (await store.get_attempt(rid, aid)).status == A.TIMEOUT
    assert (await store.get_rollout(rid)).status == R.REQUEUING


async def test_an_attempt_without_heartbeat_becomes_unresponsive_and_is_retried(
    store: Store, eventually: Eventually
) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(unresponsive_seconds=0.3))
    rid = claim.rollout.rollout_id

    await _status_becomes(store, eventually, rid, R.REQUEUING)

    first = await store.get_attempt(rid, claim.attempt.attempt_id)
    assert first.status == A.UNRESPONSIVE
    assert first.error is not None and first.error.type == "unresponsive"
    again = await store.claim_rollout("w")
    assert again is not None and again.attempt.sequence_id == 2
    await store.update_attempt(rid, again.attempt.attempt_id, status=A.SUCCEEDED)
    assert (await store.get_rollout(rid)).status == R.SUCCEEDED


async def test_an_unresponsive_attempt_on_its_last_try_fails_the_rollout(
    store: Store, eventually: Eventually
) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(unresponsive_seconds=0.2, max_attempts=1))

    r = await _status_becomes(store, eventually, claim.rollout.rollout_id, R.FAILED)

    assert r.end_time is not None
    assert (await store.get_attempt(r.rollout_id, claim.attempt.attempt_id)).status == A.UNRESPONSIVE
    assert await store.claim_rollout("w") is None


async def _keep_alive_for(
    seconds: float, signal: Callable[[], Awaitable[object]], probe: Callable[[], Awaitable[Rollout]]
) -> set[RolloutStatus]:
    """Send a sign of life every 0.05 s for ``seconds``; return every rollout status seen."""
    seen: set[RolloutStatus] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await signal()
        seen.add((await probe()).status)
        await asyncio.sleep(0.05)
    return seen


async def test_heartbeats_keep_an_attempt_alive_past_its_unresponsive_deadline(
    store: Store, eventually: Eventually
) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(unresponsive_seconds=0.5))
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id

    seen = await _keep_alive_for(1.0, lambda: store.heartbeat(rid, aid), lambda: store.get_rollout(rid))

    assert seen == {R.RUNNING}
    assert [a.status for a in await store.query_attempts(rid)] == [A.RUNNING]
    # once the heartbeats stop, the deadline applies again
    await _status_becomes(store, eventually, rid, R.REQUEUING)


async def test_spans_count_as_signs_of_life(store: Store) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(unresponsive_seconds=0.5))
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id

    seen = await _keep_alive_for(
        0.8, lambda: store.add_span(Span(rollout_id=rid, attempt_id=aid, name="step")), lambda: store.get_rollout(rid)
    )

    assert seen == {R.RUNNING}
    assert (await store.get_attempt(rid, aid)).status == A.RUNNING


# ---------------------------------------------------------------------------- late reports
async def test_a_superseded_attempts_late_success_never_decides_the_rollout(
    store: Store, eventually: Eventually
) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(unresponsive_seconds=0.3, max_attempts=3))
    rid, old = claim.rollout.rollout_id, claim.attempt.attempt_id
    await _status_becomes(store, eventually, rid, R.REQUEUING)
    new_claim = await store.claim_rollout("w2")
    assert new_claim is not None and new_claim.attempt.sequence_id == 2
    new = new_claim.attempt.attempt_id
    await store.heartbeat(rid, new)

    late = await store.update_attempt(rid, old, status=A.SUCCEEDED)

    assert late.status == A.SUCCEEDED  # the report is kept on the old attempt...
    r = await store.get_rollout(rid)
    assert r.status in (R.PREPARING, R.RUNNING)  # ...but the rollout still waits for the new one
    assert r.latest_attempt_id == new
    await store.update_attempt(rid, new, status=A.FAILED, error=ErrorInfo(message="new attempt failed"))
    final = await store.get_rollout(rid)
    assert final.status == R.FAILED
    assert final.latest_attempt_id == new


async def test_an_unresponsive_attempt_recovers_if_it_reports_before_anyone_else_claims(
    store: Store, eventually: Eventually
) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(unresponsive_seconds=0.3))
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    await _status_becomes(store, eventually, rid, R.REQUEUING)
    assert (await store.get_attempt(rid, aid)).status == A.UNRESPONSIVE

    revived = await store.heartbeat(rid, aid)

    assert revived.status == A.RUNNING
    assert (await store.get_rollout(rid)).status == R.RUNNING
    assert await store.claim_rollout("w2") is None
    await store.update_attempt(rid, aid, status=A.SUCCEEDED)
    r = await store.get_rollout(rid)
    assert r.status == R.SUCCEEDED
    assert r.attempt_count == 1


async def test_an_unresponsive_attempt_that_reports_success_directly_decides_the_rollout(
    store: Store, eventually: Eventually
) -> None:
    claim = await _enqueue_and_claim(store, RolloutConfig(unresponsive_seconds=0.2))
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    await _status_becomes(store, eventually, rid, R.REQUEUING)

    await store.update_attempt(rid, aid, status=A.SUCCEEDED)

    assert (await store.get_rollout(rid)).status == R.SUCCEEDED
    assert await store.claim_rollout("w2") is None
