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
  (:mod:`agentbolt.store.postgres_group`).
* **Versioned schema.** :mod:`agentbolt.store.postgres_schema` creates and migrates the
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
import contextvars
import logging
import os
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agentbolt.store import postgres_metrics as metrics
from agentbolt.store import postgres_reads as reads
from agentbolt.store import postgres_retention as retention
from agentbolt.store import postgres_writes as writes
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

__all__ = ["PostgresSettings", "PostgresStore", "parse_postgres_url"]

T = TypeVar("T")
log = logging.getLogger("agentbolt.store.postgres")

INSTALL_HINT = "pip install 'agentbolt[postgres]'"

SAFETY_POLL = 5.0
"""Longest sleep of a waiter between looks at the database. Waiters are woken by
``NOTIFY``; this only bounds the delay after a notification lost with the listening
connection (which also wakes everyone when it reconnects)."""

_seen_generation: contextvars.ContextVar[int | None] = contextvars.ContextVar("pg_seen_generation", default=None)

_OWN_PARAMS = ("schema", "pool_min", "pool_max", "connect_timeout", "write_groups", "group_ops")

GROUP_OPS = 64
"""Default most write ops per group transaction (see :mod:`agentbolt.store.postgres_group`)."""


@dataclass(frozen=True)
class PostgresSettings:
    """What :func:`parse_postgres_url` found: the libpq URL, and the store's own options."""

    conninfo: str
    options: dict[str, str]


def parse_postgres_url(url: str) -> PostgresSettings:
    """Split ``postgresql://user:pw@host:port/db?schema=s&pool_max=20&sslmode=require``
    into the URL for libpq and the store's own options (``schema``, ``pool_min``,
    ``pool_max``, ``connect_timeout``, ``write_groups``, ``group_ops``); other query
    parameters go to libpq."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidRequestError(f"not a PostgreSQL URL: {url!r}; use postgresql://user@host:5432/database")
    try:
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise InvalidRequestError(f"invalid PostgreSQL URL {url!r}: {exc}") from None
    own = {k: v for k, v in query if k in _OWN_PARAMS}
    rest = [(k, v) for k, v in query if k not in _OWN_PARAMS]
    if "connect_timeout" in own:
        rest.append(("connect_timeout", own["connect_timeout"]))
    conninfo = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(rest)))
    return PostgresSettings(conninfo, own)


def _int_option(name: str, value: Any, minimum: int) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise InvalidRequestError(f"{name} must be at least {minimum}, got {n}")
    return n


class PostgresStore(Store):
    """Store backed by a PostgreSQL database. Safe to share between event loops and
    threads of a process, and between processes (each with its own instance).

    ``schema`` (default ``public``, or ``?schema=`` in the URL) holds the tables: several
    independent stores may share one database. ``pool_min``/``pool_max`` size the
    connection pool (URL ``?pool_min=&pool_max=``). Concurrent writes are group-committed
    (:mod:`agentbolt.store.postgres_group`): up to ``write_groups`` transactions at once
    (default ``pool_max // 2``), each of at most ``group_ops`` ops (default 64; URL
    ``?write_groups=&group_ops=``). ``drop_schema_on_close`` drops the whole schema on
    :meth:`close` — for tests.
    """

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
        from agentbolt.store.postgres_schema import check_schema_name

        settings = parse_postgres_url(url)
        opts = settings.options
        self.url = url
        self.schema = check_schema_name(schema if schema is not None else opts.get("schema", "public"))
        self.pool_min = _int_option("pool_min", pool_min if pool_min is not None else opts.get("pool_min", 1), 0)
        self.pool_max = _int_option("pool_max", pool_max if pool_max is not None else opts.get("pool_max", 10), 1)
        if self.pool_max < self.pool_min:
            raise InvalidRequestError(f"pool_max ({self.pool_max}) must be at least pool_min ({self.pool_min})")
        groups = write_groups if write_groups is not None else opts.get("write_groups", max(1, self.pool_max // 2))
        self.write_groups = _int_option("write_groups", groups, 1)
        if self.write_groups > self.pool_max:
            raise InvalidRequestError(f"write_groups ({self.write_groups}) must be at most pool_max ({self.pool_max})")
        self.group_ops = _int_option("group_ops", group_ops if group_ops is not None else opts.get("group_ops", GROUP_OPS), 1)
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
        return f"PostgresStore({_redact(self._conninfo)!r}, schema={self.schema!r})"

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

            from agentbolt.store.postgres_engine import PgEngine
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise StoreUnavailableError(f"the PostgreSQL store needs psycopg 3: {INSTALL_HINT} ({exc})") from None
        from agentbolt.store.postgres_schema import load_secret, migrate

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
            raise StoreUnavailableError(_unreachable_message(self._conninfo, exc)) from None
        except psycopg.Error as exc:
            raise StoreUnavailableError(
                f"cannot open the PostgreSQL store at {_redact(self._conninfo)} (schema {self.schema}): {exc}"
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

    async def _run(self, fn: Callable[..., Awaitable[T]], *, write: bool) -> T:
        """Run ``fn(conn, tx)`` (a write: in one transaction, returning once committed)."""
        engine = self._engine
        if engine is None or self._pid != os.getpid() or not engine.usable_from(asyncio.get_running_loop()):
            await self.start()
            engine = self._engine
        return await engine.run(fn, write=write)

    async def _write(self, fn: Callable[..., Awaitable[T]]) -> T:
        return await self._run(fn, write=True)

    async def _read(self, fn: Callable[..., Awaitable[T]]) -> T:
        return await self._run(fn, write=False)

    # ------------------------------------------------------------------ waiting
    async def _finished(self, ids: list[str]) -> list[Rollout]:
        # remember what the notifier had said before looking, so a completion that
        # commits between this look and the wait below is not slept through
        _seen_generation.set(self._notifier.generation)
        return await super()._finished(ids)

    async def _wait_for_change(self, timeout: float) -> None:
        since = _seen_generation.get()
        await self._notifier.wait(min(timeout, self.safety_poll), since_generation=since)

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
        # an empty queue's claim is cheap too: it shares its group's commit
        return await self._write(lambda c, tx: writes.claim_rollouts(c, tx, worker_id, limit, request_id))

    async def get_rollout(self, rollout_id: str) -> Rollout:
        await self._maybe_check_deadlines()
        return await self._read(lambda c, tx: reads.get_rollout(c, tx, rollout_id))

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
            lambda c, tx: reads.query_rollouts(
                c,
                tx,
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
            lambda c, tx: reads.count_rollouts(c, tx, status=statuses, mode=mode_value, needle=needle, cap=cap)
        )

    async def get_latest_attempts(self, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
        ids = list(dict.fromkeys(rollout_ids))
        if not ids:
            return {}
        return await self._read(lambda c, tx: reads.get_latest_attempts(c, tx, ids))

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
        return await self._read(lambda c, tx: reads.get_attempt(c, tx, rollout_id, attempt_id))

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        return await self._read(lambda c, tx: reads.query_attempts(c, tx, rollout_id))

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
            lambda c, tx: reads.query_spans(c, tx, rollout_id, attempt_id, name=name, limit=limit, after=after)
        )

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
            return await self._read(lambda c, tx: retention.count_deletable_spans(c, tx, before, ids))
        deleted, after = 0, 0
        while True:  # one short transaction per chunk of rollouts
            n, last = await self._write(
                lambda c, tx, after=after: retention.delete_span_chunk(c, tx, before, ids, after)
            )
            deleted += n
            if last is None:
                return deleted
            after = last

    # ------------------------------------------------------------------ resources
    async def add_resources(self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None) -> Resources:
        # validate here (the version is set in the transaction); an own copy, like MemoryStore
        bundle = Resources(version=1, resources=resources, metadata=metadata or {})
        bundle = Resources.model_validate(bundle.model_dump())
        return await self._write(lambda c, tx: writes.add_resources(c, tx, bundle))

    async def get_resources(self, version: int) -> Resources:
        return await self._read(lambda c, tx: reads.get_resources(c, tx, version))

    async def get_latest_resources(self) -> Resources | None:
        return await self._read(reads.get_latest_resources)

    async def query_resources(self, *, limit: int = 100, cursor: str | None = None) -> Page[Resources]:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor else None
        return await self._read(lambda c, tx: reads.query_resources(c, tx, limit=limit, after=after))

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
        return await self._read(lambda c, tx: reads.get_worker(c, tx, worker_id))

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
        return await self._read(lambda c, tx: metrics.query_metrics(c, tx, run_id, after_step, limit))

    async def metric_runs(self, *, limit: int = 100) -> list[str]:
        check_limit(limit)
        return await self._read(lambda c, tx: metrics.metric_runs(c, tx, limit))

    # ------------------------------------------------------------------ stats & deadlines
    async def stats(self) -> StoreStats:
        await self._maybe_check_deadlines()
        return await self._read(reads.stats)

    async def check_deadlines(self) -> int:
        if not await self._read(writes.any_due):
            return 0
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


def _redact(conninfo: str) -> str:
    """The URL without its password, for messages."""
    parts = urllib.parse.urlsplit(conninfo)
    if parts.password is None:
        return conninfo
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _unreachable_message(conninfo: str, exc: BaseException) -> str:
    parts = urllib.parse.urlsplit(conninfo)
    host = parts.hostname or "localhost (Unix socket)"
    port = parts.port or 5432
    database = parts.path.lstrip("/") or "(default)"
    reason = " ".join(str(exc).split())  # libpq's message spans lines
    return (
        f"cannot connect to PostgreSQL at {host}:{port} (database {database}): {reason} — "
        "start PostgreSQL (e.g. `pg_ctlcluster <version> main start`, `systemctl start postgresql`, or "
        "`docker run -p 5432:5432 -e POSTGRES_PASSWORD=... postgres`) or fix the URL's host, port, user, "
        "password and database"
    )
