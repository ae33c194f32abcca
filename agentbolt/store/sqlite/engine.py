"""The threads that talk to SQLite for :class:`~agentbolt.store.sqlite.SqliteStore`.

* :class:`GroupCommitWriter` — one thread, one connection, all writes. It drains every
  pending write op and runs them in ONE ``BEGIN IMMEDIATE`` transaction (one fsync for
  many ops: group commit), each op inside its own ``SAVEPOINT`` so a failing op rolls
  back only itself. Results reach each caller's event loop after the commit, so an
  acknowledged write is durable.
* :class:`ReaderPool` — a few threads, each with its own read-only connection; WAL lets
  them read a consistent snapshot while the writer commits.

Neither is tied to an event loop: callers from any loop or thread may submit.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from agentbolt.store.errors import StoreUnavailableError
from agentbolt.store.sql.op_results import settle

__all__ = ["GroupCommitWriter", "ReaderPool", "WriteOp", "WriteTx"]

T = TypeVar("T")


class WriteTx:
    """State shared by the ops of one transaction. An op sets ``finished_rollout`` when it
    moved a rollout to a terminal status, so that waiters are woken after the commit;
    ``memo`` caches values that only this transaction's ops can change."""

    __slots__ = ("finished_rollout", "memo")

    def __init__(self) -> None:
        self.finished_rollout = False
        self.memo: dict[str, Any] = {}


WriteOp = Callable[[sqlite3.Connection, WriteTx], Any]

_STOP = object()
_Item = tuple[WriteOp, asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
_Result = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", bool, Any]


def _settle(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in results:
        settle(fut, ok, value)


def _deliver(results: list[_Result]) -> None:
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
    for loop, fut, ok, value in results:
        by_loop.setdefault(loop, []).append((fut, ok, value))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle, items)
        except RuntimeError:  # that event loop is closed: nobody is waiting
            pass


class GroupCommitWriter:
    """Serialises every write of one process through a single connection."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        *,
        on_commit: Callable[[WriteTx], None],
        max_batch: int = 1000,
        name: str = "agentbolt-sqlite-writer",
    ) -> None:
        self._connect = connect
        self._on_commit = on_commit
        self._max_batch = max_batch
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.transactions = 0
        """Committed write transactions so far."""
        self.ops = 0
        """Ops run in those transactions (succeeded or rolled back to their savepoint)."""

    # ------------------------------------------------------------------ control
    def start(self, setup: Callable[[sqlite3.Connection], T]) -> T:
        """Open the connection on the writer thread, run ``setup`` there (schema,
        migrations), then serve ops. Blocks until ``setup`` is done; re-raises its error."""
        ready = threading.Event()
        box: dict[str, Any] = {}

        def main() -> None:
            conn: sqlite3.Connection | None = None
            try:
                conn = self._connect()
                box["value"] = setup(conn)
            except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
                box["error"] = exc
                if conn is not None:
                    conn.close()
                ready.set()
                return
            ready.set()
            self._serve(conn)

        self._thread = threading.Thread(target=main, name=self._name, daemon=True)
        self._thread.start()
        ready.wait()
        if "error" in box:
            self._closed = True
            raise box["error"]
        return box["value"]

    def submit(self, op: WriteOp) -> asyncio.Future[Any]:
        """Queue ``op`` for the next transaction; the future resolves after its commit."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._closed:
                raise StoreUnavailableError("the SQLite store is closed; start() it again to use it")
            self._queue.put((op, loop, fut))
        return fut

    def close(self) -> None:
        """Run every op already queued, commit, close the connection. Blocking; idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._queue.put(_STOP)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # ------------------------------------------------------------------ the thread
    def _serve(self, conn: sqlite3.Connection) -> None:
        q = self._queue
        try:
            stop = False
            while not stop:
                item = q.get()
                batch: list[_Item] = []
                while True:
                    if item is _STOP:
                        stop = True
                        break
                    batch.append(item)
                    if len(batch) >= self._max_batch:
                        break
                    try:
                        item = q.get_nowait()
                    except queue.Empty:
                        break
                if batch:
                    self._run_batch(conn, batch)
        finally:
            conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Item]) -> None:
        try:
            results = self._transaction(conn, batch)
        except Exception as exc:  # noqa: BLE001 - the transaction as a whole failed: nobody's write stuck
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            err = (
                exc
                if isinstance(exc, StoreUnavailableError)
                else StoreUnavailableError(
                    f"SQLite write transaction failed ({type(exc).__name__}: {exc}); the write was not stored"
                )
            )
            results = [(loop, fut, False, err) for _, loop, fut in batch]
        _deliver(results)

    def _transaction(self, conn: sqlite3.Connection, batch: list[_Item]) -> list[_Result]:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StoreUnavailableError(
                f"could not lock the SQLite store for writing ({exc}); another process has held "
                "the write lock longer than the busy timeout"
            ) from exc
        tx = WriteTx()
        results: list[_Result] = []
        for op, loop, fut in batch:
            conn.execute("SAVEPOINT op")
            try:
                value = op(conn, tx)
            except Exception as exc:
                if not conn.in_transaction:  # SQLite rolled back everything (I/O error, full disk)
                    raise
                conn.execute("ROLLBACK TO op")
                conn.execute("RELEASE op")
                results.append((loop, fut, False, exc))
            else:
                conn.execute("RELEASE op")
                results.append((loop, fut, True, value))
        conn.execute("COMMIT")
        self.transactions += 1
        self.ops += len(batch)
        try:
            self._on_commit(tx)
        except Exception:  # noqa: BLE001, S110 - committed already: a failing hook must not fail the writes
            pass
        return results


class _ThreadConn(threading.local):
    """Each reader thread's own connection (None until its first read)."""

    conn: sqlite3.Connection | None = None


class ReaderPool:
    """Runs read functions on a few threads, each with its own connection, each call in
    one read transaction (a consistent snapshot)."""

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], size: int, name: str = "agentbolt-sqlite-read"
    ) -> None:
        self._connect = connect
        self._local = _ThreadConn()
        self._conns: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)

    def _conn(self) -> sqlite3.Connection:
        conn = self._local.conn
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            cf = self._executor.submit(self._call, fn)
        except RuntimeError:
            raise StoreUnavailableError("the SQLite store is closed; start() it again to use it") from None
        return await asyncio.wrap_future(cf)

    def close(self) -> None:
        """Wait for running reads, then close every connection. Blocking."""
        self._executor.shutdown(wait=True)
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
