"""``SqlStore``: the :class:`~agentbolt.store.base.Store` interface of both SQL backends.

SQLite and PostgreSQL answer every call the same way: check the arguments, then run one
read plan of :mod:`agentbolt.store.sql.reads` (the same queries and logic for both, run
by the backend's ``reads.run_plan`` in its ``reads.DIALECT``) or one write operation of
the backend's ``writes``/``metrics`` module. This class holds that mapping once. A
backend subclass adds what is its own: how an operation runs (:meth:`SqlStore._read`,
:meth:`SqlStore._write`: SQLite on a reader connection or the group-commit writer
thread, PostgreSQL in a pooled transaction), how it opens and closes, how long a waiter
sleeps between looks, and span deletion.

An operation is a function of the connection (reads on SQLite) or of the connection and
the transaction (writes, and every PostgreSQL operation), then of the arguments given to
``_read``/``_write``.
"""

from __future__ import annotations

import abc
import contextvars
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.pagination import check_cap, check_limit, check_sort_key, decode_cursor
from agentbolt.store.search import search_needle
from agentbolt.store.sql import reads
from agentbolt.store.sql.ops import MetricOps, Op, ReadOps, WriteOps
from agentbolt.store.sql.reads import Plan
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
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
    StoreStats,
    Worker,
    WorkerStatus,
)

__all__ = ["SqlStore"]

T = TypeVar("T")

_seen_generation: contextvars.ContextVar[int | None] = contextvars.ContextVar("sql_seen_generation", default=None)


class SqlStore(Store):
    """The store calls shared by :class:`~agentbolt.store.sqlite.SqliteStore` and
    :class:`~agentbolt.store.postgres.PostgresStore`.

    A subclass names its operation modules, typed by :mod:`agentbolt.store.sql.ops`
    (``_reads``: ``run_plan`` and ``DIALECT``; ``_writes``; ``_metric_ops``: ``add_metrics``),
    keeps its ``_notifier`` (woken when a write finishes a rollout) and ``_secret`` (loaded
    by :meth:`start`), and implements :meth:`_read`, :meth:`_write`, :meth:`_longest_wait`
    and :meth:`delete_spans`.
    """

    _reads: ReadOps
    _writes: WriteOps
    _metric_ops: MetricOps
    _notifier: ChangeNotifier
    _secret: bytes | None

    # ------------------------------------------------------------------ running operations
    @abc.abstractmethod
    async def _read(self, fn: Op, /, *args: Any, **kwargs: Any) -> Any:
        """Run the read operation ``fn`` with these arguments, in one read transaction."""

    @abc.abstractmethod
    async def _write(self, fn: Op, /, *args: Any, **kwargs: Any) -> Any:
        """Run the write operation ``fn`` with these arguments; returns once committed."""

    async def _plan(self, plan: Callable[..., Plan[T]], /, *args: Any, **kwargs: Any) -> T:
        """Run the shared read ``plan`` (:mod:`agentbolt.store.sql.reads`) with these
        arguments in the backend's dialect, in one read transaction."""
        # the backend may run an op again (a lost connection): each run starts a fresh plan
        return await self._read(self._reads.run_plan, functools.partial(plan, self._reads.DIALECT, *args, **kwargs))

    @abc.abstractmethod
    def _longest_wait(self) -> float:
        """Longest sleep of a waiter between looks at the database (completions this
        instance cannot be told about are seen at least this often)."""

    # ------------------------------------------------------------------ waiting
    async def _finished(self, ids: list[str]) -> list[Rollout]:
        # remember what the notifier had said before looking, so a completion that
        # commits between this look and the wait below is not slept through
        _seen_generation.set(self._notifier.generation)
        return await super()._finished(ids)

    async def _wait_for_change(self, timeout: float) -> None:
        since = _seen_generation.get()
        await self._notifier.wait(min(timeout, self._longest_wait()), since_generation=since)

    # ------------------------------------------------------------------ rollouts
    async def enqueue_rollouts(self, rollouts: Sequence[RolloutCreate]) -> list[Rollout]:
        specs = list(rollouts)
        if not specs:
            return []
        return await self._write(self._writes.enqueue_rollouts, specs)

    async def claim_rollouts(
        self, worker_id: str | None = None, limit: int = 1, request_id: str | None = None
    ) -> list[Claim]:
        check_limit(limit, 1000)
        await self._maybe_check_deadlines()
        # an empty queue's claim is cheap too: it shares its group's commit
        return await self._write(self._writes.claim_rollouts, worker_id, limit, request_id)

    async def get_rollout(self, rollout_id: str) -> Rollout:
        await self._maybe_check_deadlines()
        return await self._plan(reads.get_rollout, rollout_id)

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
        check_sort_key(sort_by)
        check_limit(limit)
        needle = search_needle(search)
        after = decode_cursor(cursor) if cursor else None
        statuses = [_enum(RolloutStatus, s).value for s in status] if status else None
        mode_value = _enum(RolloutMode, mode).value if mode is not None else None
        ids = list(rollout_ids) if rollout_ids is not None else None
        await self._maybe_check_deadlines()
        return await self._plan(
            reads.query_rollouts,
            status=statuses,
            mode=mode_value,
            rollout_ids=ids,
            needle=needle,
            sort_by=sort_by,
            descending=descending,
            limit=limit,
            after=after,
        )

    async def count_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus] | None = None,
        mode: RolloutMode | None = None,
        search: str | None = None,
        cap: int | None = None,
    ) -> int:
        check_cap(cap)
        needle = search_needle(search)
        statuses = [_enum(RolloutStatus, s).value for s in status] if status else None
        mode_value = _enum(RolloutMode, mode).value if mode is not None else None
        await self._maybe_check_deadlines()
        return await self._plan(reads.count_rollouts, status=statuses, mode=mode_value, needle=needle, cap=cap)

    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        ids = list(dict.fromkeys(rollout_ids))
        if not ids:
            return {}
        return await self._plan(reads.get_latest_attempts, ids)

    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        new = RolloutStatus(status) if status is not None else None
        return await self._write(self._writes.update_rollout, rollout_id, new, metadata)

    # ------------------------------------------------------------------ attempts
    async def get_attempt(self, rollout_id: str, attempt_id: str) -> Attempt:
        return await self._plan(reads.get_attempt, rollout_id, attempt_id)

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        return await self._plan(reads.query_attempts, rollout_id)

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: AttemptStatus | None = None,
        error: ErrorInfo | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Attempt:
        new = AttemptStatus(status) if status is not None else None
        return await self._write(self._writes.update_attempt, rollout_id, attempt_id, new, error, metadata)

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
        check_limit(limit, 1000)
        new = AttemptStatus(status) if status is not None else None
        await self._maybe_check_deadlines()
        # both in one transaction: a claim never goes out without its report
        return await self._write(
            self._writes.report_and_claim, rollout_id, attempt_id, new, error, metadata, worker_id, limit, request_id
        )

    async def heartbeat(self, rollout_id: str, attempt_id: str) -> Attempt:
        return await self._write(self._writes.heartbeat, rollout_id, attempt_id)

    # ------------------------------------------------------------------ spans
    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        batch = list(spans)
        if not batch:
            return []
        return await self._write(self._writes.add_spans, batch)

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | None = None,
        *,
        name: str | None = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> Page[Span]:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        return await self._plan(reads.query_spans, rollout_id, attempt_id, name=name, limit=limit, after=after)

    # ------------------------------------------------------------------ resources
    async def add_resources(self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None) -> Resources:
        # validate here (the version is set by the write); an own copy, like MemoryStore
        bundle = Resources(version=1, resources=resources, metadata=metadata or {})
        bundle = Resources.model_validate(bundle.model_dump())
        return await self._write(self._writes.add_resources, bundle)

    async def get_resources(self, version: int) -> Resources:
        return await self._plan(reads.get_resources, version)

    async def get_latest_resources(self) -> Resources | None:
        return await self._plan(reads.get_latest_resources)

    async def query_resources(self, *, limit: int = 100, cursor: str | None = None) -> Page[Resources]:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        return await self._plan(reads.query_resources, limit=limit, after=after)

    # ------------------------------------------------------------------ workers
    async def update_worker(
        self,
        worker_id: str,
        *,
        status: WorkerStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Worker:
        new = WorkerStatus(status) if status is not None else None
        return await self._write(self._writes.update_worker, worker_id, new, metadata)

    async def get_worker(self, worker_id: str) -> Worker:
        return await self._plan(reads.get_worker, worker_id)

    async def query_workers(self) -> list[Worker]:
        return await self._plan(reads.query_workers)

    # ------------------------------------------------------------------ training metrics
    async def add_metrics(self, records: Sequence[MetricRecord]) -> None:
        batch = list(records)
        if batch:
            await self._write(self._metric_ops.add_metrics, batch)

    async def query_metrics(
        self, run_id: str, *, after_step: int | None = None, limit: int = 1000
    ) -> list[MetricRecord]:
        check_limit(limit)
        return await self._plan(reads.query_metrics, run_id, after_step, limit)

    async def metric_runs(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        return await self._plan(reads.metric_runs, limit)

    # ------------------------------------------------------------------ stats & deadlines
    async def stats(self) -> StoreStats:
        await self._maybe_check_deadlines()
        return await self._plan(reads.stats)

    async def check_deadlines(self) -> int:
        return await self._write(self._writes.check_deadlines)

    async def get_secret(self) -> bytes:
        if self._secret is None:
            await self.start()
        assert self._secret is not None
        return self._secret


E = TypeVar("E", RolloutStatus, RolloutMode)


def _enum(kind: type[E], value: Any) -> E:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(v.value for v in kind)
        raise InvalidRequestError(f"unknown {kind.__name__} {value!r}; choose one of {allowed}") from None
