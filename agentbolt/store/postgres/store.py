"""``PostgresStore``: the store on a PostgreSQL server, shared by several agentbolt servers.

When one machine is not enough, run ``agentbolt server --store postgresql://...`` on
several machines against one database; runners may talk to any of them. Semantics are
exactly those of :class:`~agentbolt.store.memory.MemoryStore` (same lifecycle
functions, same errors, same ordering). What PostgreSQL adds:

* **Claims across processes.** A claim takes queued rollouts with ``SELECT ... FOR
  UPDATE SKIP LOCKED`` and creates their attempts in the same transaction: however many
  servers claim at once, each rollout gets exactly one live attempt. Every other write
  locks the rows it changes, so no transition is applied to a stale row.
* **Waits by LISTEN/NOTIFY.** A write that finishes a rollout notifies the store's
  channel on commit; each store instance keeps one listening connection and wakes its
  waiters (``wait_for_rollouts``) — in any server process — within milliseconds.
* **Durable.** A call returns after its transaction committed.
* **Group commit.** Concurrent writes of one store instance share transactions: each
  op in its own savepoint (it fails alone), one COMMIT for the group
  (:mod:`agentbolt.store.postgres.group`).
* **Versioned schema.** :mod:`agentbolt.store.postgres.schema` creates and migrates the
  tables on :meth:`~PostgresStore.start` (once, under an advisory lock).

Needs the extra: ``pip install 'agentbolt[postgres]'`` (psycopg 3 and its pool).

Usage::

    store = PostgresStore("postgresql://user@db-host:5432/agentbolt?pool_max=20")
    await store.start()          # optional: the first call starts it
    ...
    await store.close()
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from agentbolt.store.errors import InvalidRequestError, StoreUnavailableError
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.postgres import metrics, reads, retention, writes
from agentbolt.store.postgres.settings import (
    PostgresSettings,
    int_option,
    parse_postgres_url,
    redact,
    unreachable_message,
)
from agentbolt.store.postgres.together import BoundOp
from agentbolt.store.sql.ops import MetricOps, ReadOps, WriteOps
from agentbolt.store.sql.store import SqlStore

__all__ = ["PostgresSettings", "PostgresStore", "parse_postgres_url"]

T = TypeVar("T")
log = logging.getLogger("agentbolt.store.postgres")

INSTALL_HINT = "pip install 'agentbolt[postgres]'"

SAFETY_POLL = 5.0
"""Longest sleep of a waiter between looks at the database. Waiters are woken by
``NOTIFY``; this only bounds the delay after a notification lost with the listening
connection (which also wakes everyone when it reconnects)."""

GROUP_OPS = 64
"""Default most write ops per group transaction (see :mod:`agentbolt.store.postgres.group`)."""


class PostgresStore(SqlStore):
    """Store backed by a PostgreSQL database. Safe to share between event loops and
    threads of a process, and between processes (each with its own instance).

    ``schema`` (default ``public``, or ``?schema=`` in the URL) holds the tables: several
    independent stores may share one database. ``pool_min``/``pool_max`` size the
    connection pool (URL ``?pool_min=&pool_max=``). Concurrent writes are group-committed
    (:mod:`agentbolt.store.postgres.group`): up to ``write_groups`` transactions at once
    (default ``pool_max // 2``), each of at most ``group_ops`` ops (default 64; URL
    ``?write_groups=&group_ops=``). ``drop_schema_on_close`` drops the whole schema on
    :meth:`close` — for tests.

    The store calls are :class:`~agentbolt.store.sql.store.SqlStore`'s; what is
    PostgreSQL's own is how operations run (a pool on the loop that started the store,
    group commit), span deletion a chunk of rollouts at a time, and a cheap probe before
    each deadline check.
    """

    _reads: ReadOps = reads  # annotated: a type checker then checks each module against its protocol
    _writes: WriteOps = writes
    _metric_ops: MetricOps = metrics

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_min: int | None = None,
        pool_max: int | None = None,
        connect_timeout: float | None = None,
        write_groups: int | None = None,
        group_ops: int | None = None,
        deadline_check_interval: float = 0.25,
        drop_schema_on_close: bool = False,
        safety_poll: float = SAFETY_POLL,
    ) -> None:
        from agentbolt.store.postgres.schema import check_schema_name

        settings = parse_postgres_url(url)
        opts = settings.options
        self.url = url
        self.schema = check_schema_name(schema if schema is not None else opts.get("schema", "public"))
        self.pool_min = int_option("pool_min", pool_min if pool_min is not None else opts.get("pool_min", 1), 0)
        self.pool_max = int_option("pool_max", pool_max if pool_max is not None else opts.get("pool_max", 10), 1)
        if self.pool_max < self.pool_min:
            raise InvalidRequestError(f"pool_max ({self.pool_max}) must be at least pool_min ({self.pool_min})")
        groups = write_groups if write_groups is not None else opts.get("write_groups", max(1, self.pool_max // 2))
        self.write_groups = int_option("write_groups", groups, 1)
        if self.write_groups > self.pool_max:
            raise InvalidRequestError(f"write_groups ({self.write_groups}) must be at most pool_max ({self.pool_max})")
        self.group_ops = int_option(
            "group_ops", group_ops if group_ops is not None else opts.get("group_ops", GROUP_OPS), 1
        )
        self.connect_timeout = float(
            connect_timeout if connect_timeout is not None else opts.get("connect_timeout", 10)
        )
        self.deadline_check_interval = deadline_check_interval
        self.drop_schema_on_close = drop_schema_on_close
        self.safety_poll = safety_poll
        self._conninfo = settings.conninfo
        self._pid = os.getpid()
        self._open_lock = threading.Lock()
        self._engine: Any = None  # PgEngine, imported lazily (psycopg is an extra)
        self._starting: asyncio.AbstractEventLoop | None = None  # the loop opening the engine now
        self._secret: bytes | None = None
        self._notifier = ChangeNotifier()
        self.migrations_applied = 0
        """How many schema migrations the last :meth:`start` applied (0: already current)."""

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self._conninfo)!r}, schema={self.schema!r})"

    @property
    def channel(self) -> str:
        """The ``LISTEN/NOTIFY`` channel of this store's schema."""
        return f"agentbolt_{self.schema}"

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Connect, create or migrate the schema, open the pool and the listener on the
        running event loop. Idempotent.

        The pool lives on the loop that starts the store (in a server, the server's
        loop); other loops are served through it while it runs. If that loop has ended,
        the next call opens a fresh pool on the caller's loop."""
        self._check_fork()
        loop = asyncio.get_running_loop()
        while True:
            engine = self._engine
            if engine is not None and engine.usable_from(loop):
                return
            with self._open_lock:
                starting = self._starting
                if starting is None or starting.is_closed():
                    if self._engine is not None:  # its loop has ended: its connections go with it
                        log.warning("the event loop that opened %r has ended; opening a new pool", self)
                        self._engine = None
                    self._starting = loop
                    break
            await asyncio.sleep(0.01)  # another task (on this loop or another) is starting it
        try:
            self._engine = await self._open()
        finally:
            with self._open_lock:
                self._starting = None

    def _check_fork(self) -> None:
        # connections do not survive fork(): a child forgets them (without touching
        # them) and opens its own
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._open_lock = threading.Lock()
            self._engine = None
            self._starting = None
            self._notifier = ChangeNotifier()

    async def _open(self) -> Any:
        try:
            import psycopg

            from agentbolt.store.postgres.engine import PgEngine
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise StoreUnavailableError(f"the PostgreSQL store needs psycopg 3: {INSTALL_HINT} ({exc})") from None
        from agentbolt.store.postgres.schema import load_secret, migrate

        engine = PgEngine(
            self._conninfo,
            schema=self.schema,
            channel=self.channel,
            notifier=self._notifier,
            pool_min=self.pool_min,
            pool_max=self.pool_max,
            connect_timeout=self.connect_timeout,
            safety_poll=self.safety_poll,
            write_groups=self.write_groups,
            group_ops=self.group_ops,
        )

        async def setup(conn: Any) -> tuple[int, bytes]:
            applied = await migrate(conn, self.schema)
            return applied, await load_secret(conn, self.schema)

        try:
            self.migrations_applied, self._secret = await engine.start(setup)
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(unreachable_message(self._conninfo, exc)) from None
        except psycopg.Error as exc:
            raise StoreUnavailableError(
                f"cannot open the PostgreSQL store at {redact(self._conninfo)} (schema {self.schema}): {exc}"
            ) from None
        return engine

    async def close(self) -> None:
        """Close the pool and the listener (dropping the schema first with
        ``drop_schema_on_close``). Idempotent; a closed store starts again on its next use."""
        with self._open_lock:
            engine, self._engine = self._engine, None
        if engine is None:
            return
        before = None
        if self.drop_schema_on_close:
            schema = self.schema

            async def before(conn: Any) -> None:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

        await engine.close(before)

    async def _run(self, fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any, *, write: bool) -> T:
        """Run ``fn(conn, tx, *args, **kwargs)`` (a write: in one transaction, returning
        once committed)."""
        engine = self._engine
        if engine is None or self._pid != os.getpid() or not engine.usable_from(asyncio.get_running_loop()):
            await self.start()
            engine = self._engine
        if kwargs:
            return await engine.run(lambda c, tx: fn(c, tx, *args, **kwargs), write=write)
        if args or write:  # a write that its group may run together with others of its kind
            return await engine.run(BoundOp(fn, args) if write else lambda c, tx: fn(c, tx, *args), write=write)
        return await engine.run(fn, write=write)

    async def _write(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        return await self._run(fn, args, kwargs, write=True)

    async def _read(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        return await self._run(fn, args, kwargs, write=False)

    def _longest_wait(self) -> float:
        return self.safety_poll

    # ------------------------------------------------------------------ retention & deadlines
    async def delete_spans(
        self,
        *,
        before: float | None = None,
        rollout_ids: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> int:
        self._check_delete_filters(before, rollout_ids)
        ids = list(dict.fromkeys(rollout_ids)) if rollout_ids is not None else None
        if dry_run:
            return await self._read(retention.count_deletable_spans, before, ids)
        deleted, after = 0, 0
        while True:  # one short transaction per chunk of rollouts
            n, last = await self._write(retention.delete_span_chunk, before, ids, after)
            deleted += n
            if last is None:
                return deleted
            after = last

    async def check_deadlines(self) -> int:
        # one indexed probe first: the frequent checks open a write transaction only for work
        if not await self._read(writes.any_due):
            return 0
        return await self._write(writes.check_deadlines)
