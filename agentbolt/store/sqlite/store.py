"""``SqliteStore``: the embedded, durable default backend — one file, WAL mode.

Semantics are exactly those of :class:`~agentbolt.store.memory.MemoryStore` (same
lifecycle functions, same errors, same ordering); what this adds is durability and
sharing:

* A write is durable (``synchronous=FULL``) before its call returns.
* Several processes on one machine may share the file. Writes take SQLite's write lock
  (``BEGIN IMMEDIATE`` with a busy timeout), so a claim is atomic across processes.
* Fast: all writes of a process go through one writer thread that commits every pending
  op in one transaction (group commit), each op in its own savepoint; reads run on a
  small pool of reader connections. See :mod:`agentbolt.store.sqlite.engine`.

Usage::

    store = SqliteStore("runs/store.db")
    await store.start()          # optional: the first call starts it
    ...
    await store.close()
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agentbolt.store.errors import InvalidRequestError, StoreUnavailableError
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.sql.ops import MetricOps, ReadOps, WriteOps
from agentbolt.store.sql.store import SqlStore
from agentbolt.store.sqlite import metrics, reads, retention, writes
from agentbolt.store.sqlite.engine import GroupCommitWriter, ReaderPool, WriteTx
from agentbolt.store.sqlite.schema import connect, enable_wal, load_secret, migrate

__all__ = ["SqliteStore"]

T = TypeVar("T")

POLL_INTERVAL = 0.1
"""Longest sleep of ``wait_for_rollouts`` between looks at the file: completions made by
other processes (which cannot notify this one) are seen at least this often."""


class SqliteStore(SqlStore):
    """Store backed by one SQLite file. Safe to share between event loops, threads and
    processes on one machine.

    ``busy_timeout`` is how long a write waits for another process's write lock before
    failing with :class:`StoreUnavailableError`; ``readers`` is the number of reader
    connections.

    The store calls are :class:`~agentbolt.store.sql.store.SqlStore`'s; what is SQLite's
    own is how operations run (a reader pool, one group-commit writer thread per process),
    chunked span deletion and :meth:`vacuum`.
    """

    _reads: ReadOps = reads  # annotated: a type checker then checks each module against its protocol
    _writes: WriteOps = writes
    _metric_ops: MetricOps = metrics

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

    async def _write(self, op: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``op(conn, tx, *args, **kwargs)`` in the next group transaction; returns
        once it is committed."""
        writer = self._writer
        while writer is None or self._pid != os.getpid():
            await self.start()
            writer = self._writer
        if args or kwargs:
            return await writer.submit(lambda c, tx: op(c, tx, *args, **kwargs))
        return await writer.submit(op)

    async def _read(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, *args, **kwargs)`` on a reader connection, in one read transaction."""
        readers = self._readers
        while readers is None or self._pid != os.getpid():
            await self.start()
            readers = self._readers
        if args or kwargs:
            return await readers.run(lambda c: fn(c, *args, **kwargs))
        return await readers.run(fn)

    def _longest_wait(self) -> float:
        return POLL_INTERVAL

    async def delete_spans(
        self,
        *,
        before: float | None = None,
        rollout_ids: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> int:
        """See :meth:`Store.delete_spans`. Deletes in chunks of
        :data:`~agentbolt.store.sqlite.retention.DELETE_CHUNK` spans, one write op each,
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
                total += await self._read(retention.count_spans, before=before, rollout_ids=group)
                continue
            from_seq = 0
            while True:
                chunk = retention.DELETE_CHUNK
                deleted, from_seq = await self._write(
                    retention.delete_span_chunk, before=before, rollout_ids=group, from_seq=from_seq, chunk=chunk
                )
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
