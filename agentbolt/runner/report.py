"""Reporting an attempt's outcome — and claiming the runner's next rollout with it.

A runner whose attempt ends would report the outcome, then claim new work: two store
calls, one after the other (over HTTP, two round trips). While :meth:`Runner.run` runs,
it lends its jobs a :class:`Handoff`: a job that may take its successor reports with
``Store.report_and_claim`` and the claim it gets back starts at once, in its place — one
round trip instead of two. The loop still claims for every slot a job left without a
successor (the queue was empty, the report failed, the store had ended the attempt).

A successor claimed while the runner began to stop is given back at once: reported
failed and retryable, so the store requeues it, as it does with attempts a shutdown
interrupts.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentbolt.runner.job import Job, Outcome, RunnerStats, shutdown_error
from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidTransitionError, StoreUnavailableError
from agentbolt.types import AttemptStatus, Claim

__all__ = ["Handoff", "send_outcome"]

log = logging.getLogger("agentbolt.runner")


@dataclass
class Handoff:
    """What a running :meth:`Runner.run` lends its jobs: whether one may claim its
    successor now, and how a claimed successor starts (``start``)."""

    worker_id: str
    stop: asyncio.Event
    stats: RunnerStats
    max_rollouts: int | None
    start: Callable[[Claim], None]
    closed: bool = False
    """Set when the runner's loop has ended: no successor is started any more."""
    reserved: int = 0
    """Successor claims on their way (counted against ``max_rollouts``)."""

    @property
    def stopping(self) -> bool:
        return self.closed or self.stop.is_set()

    def reserve(self) -> bool:
        """Whether a job may claim one successor now; if so, it is counted until
        :meth:`take` or :meth:`release`."""
        if self.stopping:
            return False
        if self.max_rollouts is not None and self.stats.claimed + self.reserved >= self.max_rollouts:
            return False
        self.reserved += 1
        return True

    def release(self) -> None:
        """A reservation that claimed nothing."""
        self.reserved -= 1

    def take(self, claims: Sequence[Claim]) -> list[Claim]:
        """End a reservation with the claims it got: each starts as a job. Returns the
        ones the runner will not run (it is stopping), for the caller to give back."""
        self.release()
        if self.stopping:
            return list(claims)
        for claim in claims:
            self.start(claim)
        return []


async def send_outcome(
    store: Store, job: Job, outcome: Outcome, *, patience: float, handoff: Handoff | None = None
) -> None:
    """Report ``outcome``, retrying while the store is unreachable for up to ``patience`` seconds.

    Reporting is idempotent, so it is sent again while the store is unreachable (a server
    restarting): an outcome lost here would cost the whole attempt. With a ``handoff``
    that has room, the report also claims the job's successor (same request id on every
    try, so a retry gets back the claim of a try whose answer was lost).
    """
    rollout_id, attempt_id = job.rollout.rollout_id, job.attempt.attempt_id
    give_up = time.monotonic() + patience
    delay = 0.2
    reserved = handoff is not None and handoff.reserve()
    request_id = uuid.uuid4().hex
    try:
        while True:
            try:
                if handoff is not None and reserved:
                    done = await store.report_and_claim(
                        rollout_id, attempt_id, status=outcome.status, error=outcome.error, metadata=outcome.metadata,
                        worker_id=handoff.worker_id, limit=1, request_id=request_id,
                    )
                    reserved = False
                    await _give_back(store, handoff.take(done.claims), handoff.worker_id)
                else:
                    await store.update_attempt(rollout_id, attempt_id, status=outcome.status, error=outcome.error,
                                               metadata=outcome.metadata)
                return
            except InvalidTransitionError as exc:
                log.info("rollout %s: outcome %s not recorded, the store had already ended the attempt (%s)",
                         rollout_id, outcome.status.value, exc)
                return
            except Exception as exc:  # noqa: BLE001 — retried while the store is unavailable, else logged
                retry = isinstance(exc, StoreUnavailableError) and time.monotonic() + delay < give_up
                if not retry:
                    log.error("could not report the outcome of rollout %s (%s: %s)",
                              rollout_id, type(exc).__name__, exc)
                    return
                log.warning("reporting the outcome of rollout %s failed (%s); retrying", rollout_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
    finally:
        if handoff is not None and reserved:
            handoff.release()


async def _give_back(store: Store, claims: Sequence[Claim], worker_id: str) -> None:
    """Hand claims the runner will not run back to the queue: failed, retryable."""
    for claim in claims:
        try:
            await store.update_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id,
                                       status=AttemptStatus.FAILED, error=shutdown_error(worker_id))
        except Exception as exc:  # noqa: BLE001 — it will time out as unresponsive and be retried
            log.warning("could not give back rollout %s (%s: %s)", claim.rollout.rollout_id, type(exc).__name__, exc)
