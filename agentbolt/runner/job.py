"""One claimed attempt on its way through the runner (:class:`Job`), and what to report when it ends.

:func:`outcome_of` is the pure part of reporting: from how the agent ended (an error, a
stop request, spans that could not be stored) to the attempt's status, error and metadata
(:mod:`agentbolt.runner.report` sends it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentbolt import semconv
from agentbolt.runner.calls import AgentCall
from agentbolt.runner.errors import error_info
from agentbolt.types import Attempt, AttemptStatus, Claim, ErrorInfo, Rollout

__all__ = [
    "SHUTDOWN",
    "TIMEOUT",
    "Job",
    "Outcome",
    "RunnerStats",
    "Stopped",
    "deadline_of",
    "default_worker_id",
    "heartbeat_interval",
    "outcome_of",
    "shutdown_error",
]

log = logging.getLogger("agentbolt.runner")

SHUTDOWN = "shutdown"
"""``Job.stop_reason`` when the runner itself shuts down."""
TIMEOUT = "timeout"
"""``Job.stop_reason`` when the rollout's ``timeout_seconds`` ran out."""


@dataclass
class RunnerStats:
    """What one :meth:`Runner.run` did."""

    worker_id: str
    claimed: int = 0
    succeeded: int = 0
    failed: int = 0
    stopped: int = 0
    """Attempts stopped before they finished: timed out, cancelled, taken over by
    another attempt, or interrupted by shutdown."""
    elapsed: float = 0.0


def default_worker_id() -> str:
    """A runner name unique across machines: host, process id and a random suffix."""
    return f"runner-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def deadline_of(rollout: Rollout) -> float | None:
    """When (``time.monotonic()``) the runner stops the rollout's attempt: its ``timeout_seconds``."""
    limit = rollout.config.timeout_seconds
    return None if limit is None else time.monotonic() + limit


def heartbeat_interval(rollout: Rollout, default: float) -> float:
    """Seconds between heartbeats: ``default``, or often enough (3 a period) for ``unresponsive_seconds``."""
    interval = default
    if rollout.config.unresponsive_seconds is not None:
        interval = min(interval, rollout.config.unresponsive_seconds / 3)
    return max(interval, 0.01)


@dataclass
class Job:
    """One claimed attempt on its way through the runner."""

    claim: Claim
    deadline: float | None
    stop_reason: str | None = None
    call: AgentCall | None = None
    output: Any = None
    """The agent's output (its return value when not a reward), as JSON values."""
    stop_requested: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    @property
    def rollout(self) -> Rollout:
        return self.claim.rollout

    @property
    def attempt(self) -> Attempt:
        return self.claim.attempt

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        if not self.stop_requested.done():
            self.stop_requested.set_result(None)


class Stopped(Exception):
    """The agent of a job was stopped; ``job.stop_reason`` says why."""


@dataclass(frozen=True)
class Outcome:
    """What the runner reports for an attempt."""

    status: AttemptStatus
    error: ErrorInfo | None = None
    metadata: dict[str, Any] | None = None


def outcome_of(job: Job, error: BaseException | None, spans_lost: str | None, *, worker_id: str) -> Outcome | None:
    """The attempt's outcome; None when the store already decided it (cancelled, taken over).

    A success whose spans could not all be stored is reported failed *and retryable*: a
    success without its trace would be a silent hole in the training data.
    """
    if job.stop_reason is None and error is None and spans_lost is None:
        metadata = {semconv.ATTEMPT_OUTPUT: job.output} if job.output is not None else None
        return Outcome(AttemptStatus.SUCCEEDED, metadata=metadata)
    if job.stop_reason is None and error is None:
        return Outcome(AttemptStatus.FAILED, ErrorInfo(
            type="SpansNotStored",
            message=f"the agent finished but its spans could not all be stored ({spans_lost})",
            retryable=True,
        ))
    if job.stop_reason is None:
        assert error is not None
        return Outcome(AttemptStatus.FAILED, error_info(error))
    if job.stop_reason == TIMEOUT:
        return Outcome(AttemptStatus.TIMEOUT, ErrorInfo(
            type="timeout",
            message=f"attempt ran longer than {job.rollout.config.timeout_seconds} s; the runner stopped it",
        ))
    if job.stop_reason == SHUTDOWN:
        return Outcome(AttemptStatus.FAILED, shutdown_error(worker_id))
    return None


def shutdown_error(worker_id: str) -> ErrorInfo:
    """The error of an attempt its runner stopped by shutting down: retryable."""
    return ErrorInfo(
        type="RunnerShutdown",
        message=f"runner {worker_id} shut down before the attempt finished",
        retryable=True,
    )
