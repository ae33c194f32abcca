"""The rollout and attempt state machines, as pure functions.

Every backend loads the rollout and attempt it touches, calls one of these functions,
and writes back what changed — so memory, SQLite, PostgreSQL and the HTTP server follow
exactly the same rules. Nothing here does I/O.

Rollout::

    queuing ──claim──► preparing ──first span / heartbeat──► running ──► succeeded
        │                 │  │                                  │  │
        │                 │  └──────────────► failed ◄──────────┘  │
        │                 └──► requeuing ◄── retryable failure ◄───┘
        │                          │ (claim again: a new attempt)
        └──────► cancelled ◄───────┘  (from any non-terminal status)

Attempt::

    preparing ──► running ──► succeeded | failed | timeout | unresponsive
    unresponsive ──► running | succeeded | failed   (late signs of life, see below)

A timed-out or unresponsive attempt requeues its rollout while tries remain. An
unresponsive attempt that shows signs of life *before any other attempt took the rollout*
is recovered (its rollout goes back to running); once superseded, its late reports are
kept on the attempt record but never change the rollout's outcome.
"""

from __future__ import annotations

from typing import Any

from agentbolt.store.errors import InvalidTransitionError
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    ErrorInfo,
    Rollout,
    RolloutStatus,
    Worker,
    WorkerStatus,
    new_id,
)

__all__ = [
    "ATTEMPT_TRANSITIONS",
    "ROLLOUT_TRANSITIONS",
    "cancel_rollout",
    "check_attempt_transition",
    "check_rollout_transition",
    "expire_attempt",
    "expired_status",
    "finish_attempt",
    "is_current",
    "record_reward",
    "refresh_worker",
    "start_attempt",
    "touch_attempt",
]

R = RolloutStatus
A = AttemptStatus

ROLLOUT_TRANSITIONS: dict[RolloutStatus, frozenset[RolloutStatus]] = {
    R.QUEUING: frozenset({R.PREPARING, R.CANCELLED}),
    R.PREPARING: frozenset({R.RUNNING, R.SUCCEEDED, R.FAILED, R.REQUEUING, R.CANCELLED}),
    R.RUNNING: frozenset({R.SUCCEEDED, R.FAILED, R.REQUEUING, R.CANCELLED}),
    # requeuing → running/succeeded/failed only through recovery of the latest attempt
    R.REQUEUING: frozenset({R.PREPARING, R.RUNNING, R.SUCCEEDED, R.FAILED, R.CANCELLED}),
    R.SUCCEEDED: frozenset(),
    R.FAILED: frozenset(),
    R.CANCELLED: frozenset(),
}

ATTEMPT_TRANSITIONS: dict[AttemptStatus, frozenset[AttemptStatus]] = {
    A.PREPARING: frozenset({A.RUNNING, A.SUCCEEDED, A.FAILED, A.TIMEOUT, A.UNRESPONSIVE}),
    A.RUNNING: frozenset({A.SUCCEEDED, A.FAILED, A.TIMEOUT, A.UNRESPONSIVE}),
    A.UNRESPONSIVE: frozenset({A.RUNNING, A.SUCCEEDED, A.FAILED}),
    A.SUCCEEDED: frozenset(),
    A.FAILED: frozenset(),
    A.TIMEOUT: frozenset(),
}


def check_rollout_transition(rollout: Rollout, new: RolloutStatus) -> None:
    if new not in ROLLOUT_TRANSITIONS[rollout.status]:
        raise InvalidTransitionError(
            f"rollout {rollout.rollout_id} cannot go from {rollout.status.value} to {new.value}"
        )


def check_attempt_transition(attempt: Attempt, new: AttemptStatus) -> None:
    if new not in ATTEMPT_TRANSITIONS[attempt.status]:
        raise InvalidTransitionError(
            f"attempt {attempt.attempt_id} of rollout {attempt.rollout_id} cannot go from "
            f"{attempt.status.value} to {new.value}"
        )


def is_current(rollout: Rollout, attempt: Attempt) -> bool:
    """Whether ``attempt`` is the one that decides the rollout's outcome."""
    return rollout.latest_attempt_id == attempt.attempt_id and not rollout.status.is_terminal


def start_attempt(
    rollout: Rollout,
    worker_id: str | None,
    now: float,
    latest_resources_version: int | None,
    attempt_id: str | None = None,
) -> Attempt:
    """Claim ``rollout``: it becomes ``preparing`` with a fresh attempt, which is returned.

    A rollout enqueued without a resources version is pinned to the latest version at
    its first claim, so every rollout records the version it ran with. ``attempt_id``
    is the new attempt's id when the backend made it already (PostgreSQL claims in SQL).
    """
    check_rollout_transition(rollout, R.PREPARING)
    if not rollout.status.is_claimable:
        raise InvalidTransitionError(f"rollout {rollout.rollout_id} is {rollout.status.value}, not claimable")
    if rollout.resources_version is None:
        rollout.resources_version = latest_resources_version
    rollout.attempt_count += 1
    attempt = Attempt(
        attempt_id=attempt_id or new_id("at"),
        rollout_id=rollout.rollout_id,
        sequence_id=rollout.attempt_count,
        worker_id=worker_id,
        status=A.PREPARING,
        start_time=now,
        last_heartbeat_time=now,
        resources_version=rollout.resources_version,
    )
    rollout.status = R.PREPARING
    rollout.latest_attempt_id = attempt.attempt_id
    rollout.reward = None
    if rollout.start_time is None:
        rollout.start_time = now
    rollout.updated_at = now
    return attempt


def _recoverable(rollout: Rollout, attempt: Attempt) -> bool:
    return (
        attempt.status == A.UNRESPONSIVE
        and rollout.latest_attempt_id == attempt.attempt_id
        and rollout.status == R.REQUEUING
    )


def touch_attempt(rollout: Rollout, attempt: Attempt, now: float) -> bool:
    """A sign of life (heartbeat or span). Returns True if anything changed status.

    ``preparing`` becomes ``running``; an unresponsive attempt that nobody else has taken
    over yet recovers. Attempts that are finished keep their status.
    """
    changed = False
    if attempt.status.is_active or _recoverable(rollout, attempt):
        attempt.last_heartbeat_time = now
    if attempt.status == A.PREPARING or _recoverable(rollout, attempt):
        attempt.status = A.RUNNING
        changed = True
    if changed and rollout.latest_attempt_id == attempt.attempt_id and rollout.status in (R.PREPARING, R.REQUEUING):
        rollout.status = R.RUNNING
        rollout.updated_at = now
    return changed


def _should_retry(rollout: Rollout, status: AttemptStatus, error: ErrorInfo | None) -> bool:
    if rollout.attempt_count >= rollout.config.max_attempts:
        return False
    if status in rollout.config.retry_on:
        return True
    return bool(error is not None and error.retryable)


def finish_attempt(
    rollout: Rollout,
    attempt: Attempt,
    status: AttemptStatus,
    now: float,
    error: ErrorInfo | None = None,
) -> bool:
    """Apply an attempt's outcome (or ``running``) and, if the attempt is current, the
    rollout's. Returns False when nothing changed (the same report sent twice).

    Raises :class:`InvalidTransitionError` for moves the lifecycle forbids.
    """
    if status == attempt.status:
        return False  # idempotent re-report
    if status == A.PREPARING:
        raise InvalidTransitionError("an attempt cannot be moved back to preparing")
    if attempt.status == A.UNRESPONSIVE and not _recoverable(rollout, attempt):
        # superseded: keep a late outcome on the attempt, leave the rollout alone; a late
        # "running" revives nothing (the answer tells the worker to stop)
        if status == A.RUNNING:
            return False
        check_attempt_transition(attempt, status)
        attempt.status = status
        attempt.end_time = now
        attempt.error = error or attempt.error
        return True
    if status == A.RUNNING:
        return touch_attempt(rollout, attempt, now)
    check_attempt_transition(attempt, status)
    recovering = _recoverable(rollout, attempt)
    attempt.status = status
    attempt.end_time = now
    if error is not None:
        attempt.error = error
    if rollout.latest_attempt_id != attempt.attempt_id or rollout.status.is_terminal:
        return True
    if rollout.status == R.REQUEUING and not recovering:
        return True
    if status == A.SUCCEEDED:
        new = R.SUCCEEDED
    elif _should_retry(rollout, status, error):
        new = R.REQUEUING
    else:
        new = R.FAILED
    if new != rollout.status:
        check_rollout_transition(rollout, new)
        rollout.status = new
    if new.is_terminal:
        rollout.end_time = now
    rollout.updated_at = now
    return True


def expired_status(rollout: Rollout, attempt: Attempt, now: float) -> AttemptStatus | None:
    """``timeout`` or ``unresponsive`` if the attempt is past a deadline, else None."""
    if not attempt.status.is_active:
        return None
    cfg = rollout.config
    if cfg.timeout_seconds is not None and now - attempt.start_time >= cfg.timeout_seconds:
        return A.TIMEOUT
    if cfg.unresponsive_seconds is not None and now - attempt.last_heartbeat_time >= cfg.unresponsive_seconds:
        return A.UNRESPONSIVE
    return None


def expire_attempt(rollout: Rollout, attempt: Attempt, now: float) -> bool:
    """Mark the attempt timed out or unresponsive if it is past a deadline."""
    status = expired_status(rollout, attempt, now)
    if status is None:
        return False
    limit = rollout.config.timeout_seconds if status == A.TIMEOUT else rollout.config.unresponsive_seconds
    what = "ran longer than" if status == A.TIMEOUT else "sent no heartbeat or span for"
    return finish_attempt(
        rollout,
        attempt,
        status,
        now,
        ErrorInfo(type=status.value, message=f"attempt {what} {limit} s"),
    )


def cancel_rollout(rollout: Rollout, attempt: Attempt | None, now: float) -> bool:
    """Cancel a rollout that has not finished; its active attempt (if any) fails."""
    if rollout.status == R.CANCELLED:
        return False
    check_rollout_transition(rollout, R.CANCELLED)
    if attempt is not None and attempt.status.is_active:
        attempt.status = A.FAILED
        attempt.end_time = now
        attempt.error = ErrorInfo(type="cancelled", message="the rollout was cancelled")
    rollout.status = R.CANCELLED
    rollout.end_time = now
    rollout.updated_at = now
    return True


def record_reward(rollout: Rollout, attempt: Attempt, value: float, now: float) -> None:
    """Keep the latest primary reward on the attempt and, if current, on the rollout."""
    attempt.reward = value
    if rollout.latest_attempt_id == attempt.attempt_id:
        rollout.reward = value
        rollout.updated_at = now


def refresh_worker(
    worker: Worker, now: float, status: WorkerStatus | None = None, metadata: dict[str, Any] | None = None
) -> None:
    """A worker's heartbeat: refresh its time, set its status (a worker that is not busy
    holds no current rollout) and merge its metadata."""
    worker.last_heartbeat_time = now
    if status is not None:
        worker.status = status
        if status != WorkerStatus.BUSY:
            worker.current_rollout_id = worker.current_attempt_id = None
    if metadata:
        worker.metadata.update(metadata)
