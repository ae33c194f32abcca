"""``SqliteStore``: the embedded, durable default backend — one file, WAL mode.

Semantics are exactly those of :class:`~agentbolt.store.memory.MemoryStore` (same
lifecycle functions, same errors, same ordering); what this adds is durability and
sharing:

* A write is durable (``synchronous=FULL``) before its call returns.
* Several processes on one machine may share the file. Writes take SQLite's write lock
  (``BEGIN IMMEDIATE`` with a busy timeout), so a claim is atomic across processes.
* Fast: all writes of a process go through one writer thread that commits every pending
  op in one transaction (group commit), each op in its own savepoint; reads run on a
  small pool of reader connections. See :mod:`agentbolt.store.sqlite_engine`.

Usage::

    store = SqliteStore("runs/store.db")
    await store.start()          # optional: the first call starts it
    ...
    await store.close()
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agentbolt.store import sqlite_metrics as metrics
from agentbolt.store import sqlite_reads as reads
from agentbolt.store import sqlite_retention as retention
from agentbolt.store import sqlite_writes as writes
from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError, StoreUnavailableError
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.pagination import (
    check_cap,
    check_limit,
    check_sort_key,
    decode_cursor,
)
from agentbolt.store.search import search_needle
from agentbolt.store.sqlite_engine import (
    GroupCommitWriter,
    ReaderPool,
    WriteOp,
    WriteTx,
)
from agentbolt.store.sqlite_schema import connect, enable_wal, load_secret, migrate
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Claim,
    ErrorInfo,
    MetricRecord,
    Page,
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

__all__ = ["SqliteStore"]

T = TypeVar("T")

POLL_INTERVAL = 0.1
"""Longest sleep of ``wait_for_rollouts`` between looks at the file: completions made by
other processes (which cannot notify this one) are seen at least this often."""

_seen_generation: contextvars.ContextVar[int | None] = contextvars.ContextVar("sqlite_seen_generation", default=None)


class SqliteStore(Store):
    """Store backed by one SQLite file. Safe to share between event loops, threads and
    processes on one machine.

    ``busy_timeout`` is how long a write waits for another process's write lock before
    failing with :class:`StoreUnavailableError`; ``readers`` is the number of reader
    connections.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        deadline_check_interval: float = 0.25,
        busy_timeout: float = 30.0,
        readers: int = 4,
    ) -> None:
        path_str = os.fspath(path)
        if not path_str or path_str == ":memory:":
            raise InvalidRequestError(
                f"SqliteStore needs a file path, got {path_str!r}; use MemoryStore for a store in memory"
            )
        if readers < 1:
            raise InvalidRequestError(f"readers must be at least 1, got {readers}")
        self.path = Path(path_str)
        self.deadline_check_interval = deadline_check_interval
        self.busy_timeout = busy_timeout
        self._reader_count = readers
        self._pid = os.getpid()
        self._open_lock = threading.Lock()
        self._writer: GroupCommitWriter | None = None
        self._readers: ReaderPool | None = None
        self._secret: bytes | None = None
        self._notifier = ChangeNotifier()
        self.migrations_applied = 0
        """How many schema migrations the last :meth:`start` applied (0: already current)."""

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Create or open the file, switch it to WAL, apply missing migrations. Idempotent."""
        self._check_fork()
        if self._writer is None:
            await asyncio.to_thread(self._open)

    def _check_fork(self) -> None:
        # threads and SQLite connections do not survive fork(): a child process that
        # inherited this object forgets them (without touching them) and opens its own
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._open_lock = threading.Lock()
            self._writer = self._readers = None
            self._notifier = ChangeNotifier()

    def _connect(self, read_only: bool = False) -> sqlite3.Connection:
        return connect(self.path, busy_timeout=self.busy_timeout, read_only=read_only)

    def _setup(self, conn: sqlite3.Connection) -> tuple[int, bytes]:
        enable_wal(conn)
        return migrate(conn), load_secret(conn)

    def _open(self) -> None:
        with self._open_lock:
            if self._writer is not None:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailableError(f"cannot create the folder for {self.path}: {exc}") from exc
            writer = GroupCommitWriter(self._connect, on_commit=self._after_commit)
            try:
                self.migrations_applied, self._secret = writer.start(self._setup)
            except (OSError, sqlite3.Error) as exc:
                raise StoreUnavailableError(f"cannot open the SQLite store at {self.path}: {exc}") from exc
            self._readers = ReaderPool(functools.partial(self._connect, True), self._reader_count)
            self._writer = writer

    async def close(self) -> None:
        """Finish and commit queued writes, then close every connection. Idempotent;
        a closed store starts again on its next use."""
        with self._open_lock:
            writer, readers = self._writer, self._readers
            self._writer = self._readers = None
        if writer is not None:
            await asyncio.to_thread(writer.close)
        if readers is not None:
            await asyncio.to_thread(readers.close)

    def _after_commit(self, tx: WriteTx) -> None:
        if tx.finished_rollout:
            self._notifier.notify()

    async def _write(self, op: WriteOp) -> Any:
        """Run ``op`` in the next group transaction; returns once it is committed."""
        writer = self._writer
        while writer is None or self._pid != os.getpid():
            await self.start()
            writer = self._writer
        return await writer.submit(op)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a reader connection, in one read transaction."""
        readers = self._readers
        while readers is None or self._pid != os.getpid():
            await self.start()
            readers = self._readers
        return await readers.run(fn)

    # ------------------------------------------------------------------ waiting
    async def _finished(self, ids: list[str]) -> list[Rollout]:
        # remember what the notifier had said before looking, so a completion that
        # commits between this look and the wait below is not slept through
        _seen_generation.set(self._notifier.generation)
        return await super()._finished(ids)

    async def _wait_for_change(self, timeout: float) -> None:
        since = _seen_generation.get()
        await self._notifier.wait(min(timeout, POLL_INTERVAL), since_generation=since)

    # ------------------------------------------------------------------ rollouts
    async def enqueue_rollouts(self, rollouts: Sequence[RolloutCreate]) -> list[Rollout]:
        specs = list(rollouts)
        if not specs:
            return []
        return await self._write(lambda c, tx: writes.enqueue_rollouts(c, tx, specs))

    async def claim_rollouts(
        self, worker_id: str | None = None, limit: int = 1, request_id: str | None = None
    ) -> list[Claim]:
        check_limit(limit, 1000)
        await self._maybe_check_deadlines()
        return await self._write(lambda c, tx: writes.claim_rollouts(c, tx, worker_id, limit, request_id))

    async def get_rollout(self, rollout_id: str) -> Rollout:
        await self._maybe_check_deadlines()
        return await self._read(lambda c: reads.get_rollout(c, rollout_id))

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
        return await self._read(
            lambda c: reads.query_rollouts(
                c,
                status=statuses,
                mode=mode_value,
                rollout_ids=ids,
                needle=needle,
                sort_by=sort_by,
                descending=descending,
                limit=limit,
                after=after,
            )
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
        return await self._read(
            lambda c: reads.count_rollouts(c, status=statuses, mode=mode_value, needle=needle, cap=cap)
        )

    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        ids = list(dict.fromkeys(rollout_ids))
        if not ids:
            return {}
        return await self._read(lambda c: reads.get_latest_attempts(c, ids))

    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        new = RolloutStatus(status) if status is not None else None
        return await self._write(lambda c, tx: writes.update_rollout(c, tx, rollout_id, new, metadata))

    # ------------------------------------------------------------------ attempts
    async def get_attempt(self, rollout_id: str, attempt_id: str) -> Attempt:
        return await self._read(lambda c: reads.get_attempt(c, rollout_id, attempt_id))

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        return await self._read(lambda c: reads.query_attempts(c, rollout_id))

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
        return await self._write(
            lambda c, tx: writes.update_attempt(c, tx, rollout_id, attempt_id, new, error, metadata)
        )

    async def heartbeat(self, rollout_id: str, attempt_id: str) -> Attempt:
        return await self._write(lambda c, tx: writes.heartbeat(c, tx, rollout_id, attempt_id))

    # ------------------------------------------------------------------ spans
    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        batch = list(spans)
        if not batch:
            return []
        return await self._write(lambda c, tx: writes.add_spans(c, tx, batch))

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
        return await self._read(
            lambda c: reads.query_spans(c, rollout_id, attempt_id, name=name, limit=limit, after=after)
        )

    async def delete_spans(
        self,
        *,
        before: float | None = None,
        rollout_ids: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> int:
        """See :meth:`Store.delete_spans`. Deletes in chunks of
        :data:`~agentbolt.store.sqlite_retention.DELETE_CHUNK` spans, one write op each,
        so other writers are never held up for long."""
        self._check_delete_filters(before, rollout_ids)
        if rollout_ids is None:
            groups: list[list[str] | None] = [None]
        else:
            ids = list(dict.fromkeys(rollout_ids))
            groups = [ids[i : i + 500] for i in range(0, len(ids), 500)]
        total = 0
        for group in groups:
            if dry_run:
                total += await self._read(functools.partial(retention.count_spans, before=before, rollout_ids=group))
                continue
            from_seq = 0
            while True:
                chunk = retention.DELETE_CHUNK
                op = functools.partial(
                    retention.delete_span_chunk, before=before, rollout_ids=group, from_seq=from_seq, chunk=chunk
                )
                deleted, from_seq = await self._write(op)
                total += deleted
                if deleted < chunk:
                    break
        return total

    async def vacuum(self) -> None:
        """Give the space of deleted rows back to the filesystem (SQLite ``VACUUM``).

        Deleting spans frees pages that later writes reuse, but the file keeps its size;
        this rewrites it. It holds the write lock while it runs (seconds per GB): run it
        when the store is quiet, e.g. right after ``agentbolt store prune-spans``."""
        await self.start()

        def run() -> None:
            conn = self._connect()
            try:
                retention.vacuum(conn)
            finally:
                conn.close()

        await asyncio.to_thread(run)

    # ------------------------------------------------------------------ resources
    async def add_resources(self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None) -> Resources:
        # validate here (version is set by the writer); an own copy, like MemoryStore
        bundle = Resources(version=1, resources=resources, metadata=metadata or {})
        bundle = Resources.model_validate(bundle.model_dump())
        return await self._write(lambda c, tx: writes.add_resources(c, tx, bundle))

    async def get_resources(self, version: int) -> Resources:
        return await self._read(lambda c: reads.get_resources(c, version))

    async def get_latest_resources(self) -> Resources | None:
        return await self._read(reads.get_latest_resources)

    async def query_resources(self, *, limit: int = 100, cursor: str | None = None) -> Page[Resources]:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        return await self._read(lambda c: reads.query_resources(c, limit=limit, after=after))

    # ------------------------------------------------------------------ workers
    async def update_worker(
        self,
        worker_id: str,
        *,
        status: WorkerStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Worker:
        new = WorkerStatus(status) if status is not None else None
        return await self._write(lambda c, tx: writes.update_worker(c, tx, worker_id, new, metadata))

    async def get_worker(self, worker_id: str) -> Worker:
        return await self._read(lambda c: reads.get_worker(c, worker_id))

    async def query_workers(self) -> list[Worker]:
        return await self._read(reads.query_workers)

    # ------------------------------------------------------------------ training metrics
    async def add_metrics(self, records: Sequence[MetricRecord]) -> None:
        batch = list(records)
        if batch:
            await self._write(lambda c, tx: metrics.add_metrics(c, tx, batch))

    async def query_metrics(
        self, run_id: str, *, after_step: int | None = None, limit: int = 1000
    ) -> list[MetricRecord]:
        check_limit(limit)
        return await self._read(lambda c: metrics.query_metrics(c, run_id, after_step, limit))

    async def metric_runs(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        return await self._read(lambda c: metrics.metric_runs(c, limit))

    # ------------------------------------------------------------------ stats & deadlines
    async def stats(self) -> StoreStats:
        await self._maybe_check_deadlines()
        return await self._read(reads.stats)

    async def check_deadlines(self) -> int:
        return await self._write(writes.check_deadlines)

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
