"""The one Store interface every backend implements.

The Store is the hub of agentbolt: algorithms enqueue rollouts and publish resources,
runners claim rollouts and report spans and outcomes, the dashboard reads. Backends
(memory, SQLite, PostgreSQL, HTTP client) differ only in where the data lives; the rules
— FIFO claims, one live attempt per rollout, retries, idempotent spans — are the same and
are checked by one conformance suite (``tests/store/test_conformance.py``).

All methods are ``async``. Errors are the typed exceptions of
:mod:`agentbolt.store.errors`.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Sequence
from typing import Any, Self

from agentbolt.store.errors import InvalidRequestError, NotFoundError
from agentbolt.store.pagination import check_limit
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Claim,
    ErrorInfo,
    MetricRecord,
    Page,
    ReportAndClaim,
    Resource,
    Resources,
    Rollout,
    RolloutConfig,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
    StoreStats,
    Worker,
    WorkerStatus,
)

__all__ = ["Store"]


class Store(abc.ABC):
    """Abstract store. Subclasses implement the abstract methods; the rest is shared.

    ``deadline_check_interval`` bounds how late a timeout or an unresponsive attempt is
    noticed: deadlines are checked at most that often, on claims, reads and while
    waiting.
    """

    deadline_check_interval: float = 0.25
    _last_deadline_check: float = 0.0

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Open connections, create the schema. Idempotent."""

    async def close(self) -> None:
        """Release connections. Idempotent."""

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ rollouts
    @abc.abstractmethod
    async def enqueue_rollouts(self, rollouts: Sequence[RolloutCreate]) -> list[Rollout]:
        """Queue rollouts (FIFO). A given ``rollout_id`` already stored is not queued
        again: the stored rollout is returned, so re-sending an enqueue is safe."""

    @abc.abstractmethod
    async def claim_rollouts(
        self, worker_id: str | None = None, limit: int = 1, request_id: str | None = None
    ) -> list[Claim]:
        """Take up to ``limit`` rollouts in queue order, each with a new ``preparing``
        attempt. Each rollout is claimed by exactly one live attempt. The same
        ``request_id`` sent again returns the same claims (a safe retry)."""

    @abc.abstractmethod
    async def get_rollout(self, rollout_id: str) -> Rollout:
        """The rollout, or :class:`NotFoundError`."""

    @abc.abstractmethod
    async def query_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus] | None = None,
        mode: RolloutMode | None = None,
        rollout_ids: Sequence[str] | None = None,
        search: str | None = None,
        sort_by: str = "created_at",
        descending: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Rollout]:
        """Rollouts matching all given filters, one page at a time (keyset cursor).

        ``search`` keeps rollouts whose id or input (as compact JSON) contains it,
        ignoring ASCII case (see :mod:`agentbolt.store.search`). ``sort_by`` is one of
        :data:`~agentbolt.store.pagination.ROLLOUT_SORT_KEYS`; ties are broken by id
        (by enqueue order for ``created_at``)."""

    @abc.abstractmethod
    async def count_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus] | None = None,
        mode: RolloutMode | None = None,
        search: str | None = None,
        cap: int | None = None,
    ) -> int:
        """How many rollouts match the filters (the same as :meth:`query_rollouts`).
        With ``cap``, counting stops there: the answer is ``min(count, cap)``, so a
        count over a large store with a slow filter (search) stays bounded."""

    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        """The latest attempt of each listed rollout that has one, by rollout id
        (unknown ids and rollouts never claimed are left out). Backends override this
        with one query; this default reads rollout by rollout."""
        out: dict[str, Attempt] = {}
        for rid in dict.fromkeys(rollout_ids):
            try:
                rollout = await self.get_rollout(rid)
                if rollout.latest_attempt_id is not None:
                    out[rid] = await self.get_attempt(rid, rollout.latest_attempt_id)
            except NotFoundError:
                continue
        return out

    @abc.abstractmethod
    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        """Change a rollout's metadata (merged) or cancel it (``status=cancelled``;
        other status changes happen through attempts)."""

    # ------------------------------------------------------------------ attempts
    @abc.abstractmethod
    async def get_attempt(self, rollout_id: str, attempt_id: str) -> Attempt: ...

    @abc.abstractmethod
    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        """All attempts of a rollout, oldest first."""

    @abc.abstractmethod
    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: AttemptStatus | None = None,
        error: ErrorInfo | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Attempt:
        """Report progress or the outcome of an attempt. Re-sending the same outcome is
        a no-op. The rollout follows if the attempt is current (see lifecycle)."""

    async def report_and_claim(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: AttemptStatus | None = None,
        error: ErrorInfo | None = None,
        metadata: dict[str, Any] | None = None,
        worker_id: str | None = None,
        limit: int = 1,
        request_id: str | None = None,
    ) -> ReportAndClaim:
        """:meth:`update_attempt`, then :meth:`claim_rollouts` — a worker reporting the
        outcome of one attempt and taking its next work in one call (over HTTP, one
        round trip instead of two).

        The report is applied first, so the worker's next claim sees it (a rollout it
        requeued may come back). If the report fails, its error is raised and nothing is
        claimed. The same ``request_id`` sent again returns the same claims and the
        report, being idempotent, changes nothing again: a retry is safe. SQL backends
        override this to do both in one transaction."""
        check_limit(limit, 1000)
        attempt = await self.update_attempt(rollout_id, attempt_id, status=status, error=error, metadata=metadata)
        claims = await self.claim_rollouts(worker_id, limit, request_id)
        return ReportAndClaim(attempt=attempt, claims=claims)

    @abc.abstractmethod
    async def heartbeat(self, rollout_id: str, attempt_id: str) -> Attempt:
        """Keep an attempt alive. The returned attempt tells the worker whether to go on:
        if its status is no longer active (timeout, cancelled...), stop the agent."""

    # ------------------------------------------------------------------ spans
    @abc.abstractmethod
    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        """Store spans idempotently by ``(rollout_id, attempt_id, span_id)`` and return
        them with their ``sequence_id``. A span counts as a heartbeat; a reward span
        updates the attempt's (and current rollout's) reward."""

    @abc.abstractmethod
    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | None = None,
        *,
        name: str | None = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> Page[Span]:
        """Spans of a rollout (all attempts, or one; ``attempt_id="latest"`` for the
        latest), ordered by attempt then sequence id."""

    @abc.abstractmethod
    async def delete_spans(
        self,
        *,
        before: float | None = None,
        rollout_ids: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> int:
        """Delete the spans of finished rollouts, so the store does not grow without bound.

        Only rollouts whose status is terminal (succeeded, failed, cancelled) lose spans:
        spans of queued, preparing, running or requeuing rollouts are never touched, so
        a live trace is never cut. A rollout's spans go all together (every attempt).
        The filters combine:

        * ``before`` (epoch seconds) — rollouts that finished (``end_time``) strictly
          before this time;
        * ``rollout_ids`` — only these rollouts (unknown or unfinished ids are skipped,
          not an error).

        At least one filter is required (:class:`InvalidRequestError` otherwise): pass
        ``before=time.time()`` to mean "every finished rollout". Rollouts, attempts and
        their rewards stay; :meth:`stats` counts fewer spans. With ``dry_run`` nothing
        is deleted. Returns how many spans were (or, with ``dry_run``, would be)
        deleted. Deleting again is a no-op returning 0; a span sent after its rollout's
        spans were deleted is stored as new."""

    @staticmethod
    def _check_delete_filters(before: float | None, rollout_ids: Sequence[str] | None) -> None:
        """Refuse a :meth:`delete_spans` call with no filter (a likely mistake)."""
        if before is None and rollout_ids is None:
            raise InvalidRequestError(
                "delete_spans needs a filter: pass before=<epoch seconds> and/or rollout_ids=[...] "
                "(before=time.time() means every finished rollout)"
            )

    # ------------------------------------------------------------------ resources
    @abc.abstractmethod
    async def add_resources(
        self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None
    ) -> Resources:
        """Publish a new resources version holding exactly ``resources``."""

    @abc.abstractmethod
    async def get_resources(self, version: int) -> Resources: ...

    @abc.abstractmethod
    async def get_latest_resources(self) -> Resources | None: ...

    @abc.abstractmethod
    async def query_resources(self, *, limit: int = 100, cursor: str | None = None) -> Page[Resources]:
        """Resource versions, newest first."""

    async def update_resources(
        self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None
    ) -> Resources:
        """Publish a new version: the latest bundle with ``resources`` replacing or
        adding entries by name."""
        latest = await self.get_latest_resources()
        merged: dict[str, Any] = dict(latest.resources) if latest else {}
        merged.update(resources)
        return await self.add_resources(merged, metadata)

    # ------------------------------------------------------------------ workers
    @abc.abstractmethod
    async def update_worker(
        self,
        worker_id: str,
        *,
        status: WorkerStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Worker:
        """Register a worker or refresh its heartbeat (and status/metadata)."""

    @abc.abstractmethod
    async def get_worker(self, worker_id: str) -> Worker: ...

    @abc.abstractmethod
    async def query_workers(self) -> list[Worker]: ...

    # ------------------------------------------------------------------ training metrics
    @abc.abstractmethod
    async def add_metrics(self, records: Sequence[MetricRecord]) -> None:
        """Store training metrics, upserting by ``(run_id, step)``: a record for a step
        already stored is merged into it (new keys added, same keys overwritten, the
        timestamp taken from the newer record), so re-sending is safe and a trainer may
        log a step's train and eval metrics separately. Records of one call are applied
        in order."""

    @abc.abstractmethod
    async def query_metrics(
        self, run_id: str, *, after_step: int | None = None, limit: int = 1000
    ) -> list[MetricRecord]:
        """Up to ``limit`` (1..10,000) records of ``run_id`` with ``step > after_step``,
        by step ascending. Pass the last step seen as ``after_step`` to poll for new
        points. An unknown run has no records (an empty list, not an error)."""

    @abc.abstractmethod
    async def metric_runs(self, *, limit: int = 100) -> list[str]:
        """Ids of runs that logged metrics, most recently written first, at most
        ``limit`` (1..10,000)."""

    # ------------------------------------------------------------------ stats & deadlines
    @abc.abstractmethod
    async def stats(self) -> StoreStats: ...

    @abc.abstractmethod
    async def check_deadlines(self) -> int:
        """Expire attempts past their timeout or unresponsive deadline (requeuing or
        failing their rollouts). Returns how many expired."""

    @abc.abstractmethod
    async def get_secret(self) -> bytes:
        """A random secret created once per store (and persisted by durable backends),
        used by the server to sign rollout-scoped tokens. It never leaves the server:
        :class:`~agentbolt.store.http.HttpStore` refuses to fetch it."""

    async def _maybe_check_deadlines(self) -> None:
        t = time.monotonic()
        if t - self._last_deadline_check >= self.deadline_check_interval:
            self._last_deadline_check = t
            await self.check_deadlines()

    # ------------------------------------------------------------------ waiting
    async def _wait_for_change(self, timeout: float) -> None:
        """Sleep until the store may have changed, or ``timeout``. Backends override
        this with a real notification; the default just sleeps."""
        await asyncio.sleep(timeout)

    async def wait_for_rollouts(self, rollout_ids: Sequence[str], timeout: float | None = None) -> list[Rollout]:
        """Wait until every listed rollout has finished, or ``timeout`` seconds.

        Returns the finished ones (in the order given). Unknown ids raise
        :class:`NotFoundError`. Sleeps on change notifications, not a busy loop.
        """
        ids = list(dict.fromkeys(rollout_ids))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            await self._maybe_check_deadlines()
            done = await self._finished(ids)
            if len(done) == len(ids):
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            step = self.deadline_check_interval if remaining is None else min(remaining, self.deadline_check_interval)
            await self._wait_for_change(max(step, 0.001))
        order = {rid: i for i, rid in enumerate(ids)}
        return sorted(done, key=lambda r: order[r.rollout_id])

    async def _finished(self, ids: list[str]) -> list[Rollout]:
        found: list[Rollout] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            page = await self.query_rollouts(rollout_ids=chunk, limit=len(chunk))
            if len(page.items) != len(chunk):
                known = {r.rollout_id for r in page.items}
                missing = [r for r in chunk if r not in known]
                raise NotFoundError(f"unknown rollout ids: {', '.join(missing[:10])}")
            found.extend(r for r in page.items if r.status.is_terminal)
        return found

    # ------------------------------------------------------------------ conveniences
    async def enqueue_rollout(
        self,
        input: Any = None,
        *,
        mode: RolloutMode = RolloutMode.TRAIN,
        rollout_id: str | None = None,
        resources_version: int | None = None,
        config: RolloutConfig | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        spec = RolloutCreate(
            input=input,
            mode=mode,
            rollout_id=rollout_id,
            resources_version=resources_version,
            config=config or RolloutConfig(),
            metadata=metadata or {},
        )
        return (await self.enqueue_rollouts([spec]))[0]

    async def claim_rollout(self, worker_id: str | None = None) -> Claim | None:
        claims = await self.claim_rollouts(worker_id, 1)
        return claims[0] if claims else None

    async def cancel_rollout(self, rollout_id: str) -> Rollout:
        return await self.update_rollout(rollout_id, status=RolloutStatus.CANCELLED)

    async def add_span(self, span: Span) -> Span:
        return (await self.add_spans([span]))[0]

    async def get_spans(self, rollout_id: str, attempt_id: str | None = None) -> list[Span]:
        """Every span of a rollout (or attempt), all pages."""
        out: list[Span] = []
        cursor: str | None = None
        while True:
            page = await self.query_spans(rollout_id, attempt_id, limit=5000, cursor=cursor)
            out.extend(page.items)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor
