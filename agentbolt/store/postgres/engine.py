"""The connection machinery of :class:`~agentbolt.store.postgres.PostgresStore`.

:class:`PgEngine` holds the psycopg ``AsyncConnectionPool`` and the listening connection,
on the event loop that started it (its *home*: in a server, the server's loop). Callers
hand it a function of a connection; it runs inside one transaction and returns after the
commit (so an acknowledged write is durable). A caller on another event loop (another
thread) is served through the home loop, so one store object may be shared by several
threads, as the other backends allow. (A private loop thread for every call was measured
3x slower under load: the two threads fight over the GIL.)

Waits use ``LISTEN/NOTIFY``: writes that finish a rollout send
``pg_notify`` on the store's channel inside their transaction; PostgreSQL delivers it on
commit to every listening server process, whose listener wakes the in-process waiters
(:class:`~agentbolt.store.notify.ChangeNotifier`). After a lost listening connection the
listener reconnects and wakes everyone once (notifications may have been missed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentbolt.store.errors import StoreUnavailableError
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.postgres.group import WriteGroups
from agentbolt.store.postgres.tx import RETRYABLE as _RETRYABLE
from agentbolt.store.postgres.tx import PgTx, retire_if_refused, translate_error
from agentbolt.store.postgres.tx import lost_while_committing as _lost_while_committing
from agentbolt.store.postgres.tx import write_transaction as _write_transaction

__all__ = ["PgEngine", "PgTx", "translate_error"]

log = logging.getLogger("agentbolt.store.postgres")
T = TypeVar("T")

_MAX_TRIES = 5


class PgEngine:
    """One pool and one listener, living on the event loop that started them."""

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str,
        channel: str,
        notifier: ChangeNotifier,
        pool_min: int,
        pool_max: int,
        connect_timeout: float,
        safety_poll: float,
        write_groups: int,
        group_ops: int,
    ) -> None:
        self.conninfo = conninfo
        self.schema = schema
        self.channel = channel
        self.notifier = notifier
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._connect_timeout = connect_timeout
        self._safety_poll = safety_poll  # how often a quiet listener checks its connection
        self._write_groups = write_groups
        self._group_ops = group_ops
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pool: AsyncConnectionPool | None = None
        self._listener: asyncio.Task[None] | None = None
        self._gate: asyncio.Semaphore | None = None
        self.groups: WriteGroups | None = None
        """The group committer of this engine's writes (see :mod:`~agentbolt.store.postgres.group`)."""
        self._closed = False
        self.application_name = f"agentbolt:{schema}"
        """What the store's connections call themselves (``pg_stat_activity``)."""
        self.listener_connects = 0
        """How many times the listener (re)connected."""

    # ------------------------------------------------------------------ control
    async def start(self, setup: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``setup`` on a fresh autocommit connection (schema, migrations), then open
        the pool and the listener on the running loop, which becomes the engine's home."""
        self._loop = asyncio.get_running_loop()
        try:
            return await self._start(setup)
        except BaseException:
            await self._close(None)
            raise

    async def _start(self, setup: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        conn = await psycopg.AsyncConnection.connect(
            self.conninfo,
            autocommit=True,
            connect_timeout=max(1, round(self._connect_timeout)),
            application_name=self.application_name,
        )
        try:
            value = await setup(conn)
        finally:
            await conn.close()
        self._pool = AsyncConnectionPool(
            self.conninfo,
            min_size=self._pool_min,
            max_size=self._pool_max,
            kwargs={
                "autocommit": True,
                "options": f"-c search_path={self.schema}",
                "application_name": self.application_name,
            },
            timeout=self._connect_timeout,
            open=False,
            name=f"agentbolt-{self.schema}",
        )
        await self._pool.open(wait=True, timeout=self._connect_timeout)
        self._gate = asyncio.Semaphore(self._pool_max)
        self.groups = WriteGroups(
            self._pool,
            self._gate,
            channel=self.channel,
            notifier=self.notifier,
            run_alone=lambda fn: self._run(fn, True),
            max_groups=self._write_groups,
            max_ops=self._group_ops,
        )
        listening = asyncio.Event()
        self._listener = asyncio.create_task(self._listen(listening), name=f"agentbolt-listen-{self.schema}")
        try:
            await asyncio.wait_for(listening.wait(), self._connect_timeout)
        except TimeoutError:
            raise StoreUnavailableError("the PostgreSQL listener could not connect") from None
        return value

    def usable_from(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a caller on ``loop`` can use the engine: it is the home loop, or the
        home loop is running (in another thread) to serve the call."""
        home = self._loop
        return not self._closed and home is not None and (home is loop or (home.is_running() and not home.is_closed()))

    async def close(self, before: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]] | None = None) -> None:
        """Stop the listener, run ``before`` (e.g. drop the schema) on a pool connection,
        close the pool. Idempotent. From another loop, the home loop does it."""
        if self._closed:
            return
        self._closed = True
        home = self._loop
        if home is None:
            return
        if home is asyncio.get_running_loop():
            await self._close(before)
        elif home.is_running() and not home.is_closed():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._close(before), home))
        else:
            log.warning(
                "the event loop that opened this PostgreSQL store has ended; its connections are dropped "
                "without a clean close (close the store on the loop that uses it)"
            )
            if before is not None:  # still do what closing promised, on a connection of this loop
                try:
                    async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as conn:
                        await before(conn)
                except psycopg.Error as exc:
                    log.warning("closing the PostgreSQL store: %s", exc)

    async def _close(self, before: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]] | None) -> None:
        if self.groups is not None:  # writes already accepted are committed and answered
            await self.groups.drain()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, psycopg.Error):
                await self._listener
        if self._pool is not None:
            if before is not None:
                try:
                    async with self._pool.connection() as conn:
                        await before(conn)
                except psycopg.Error as exc:  # closing must not fail: say what was left behind
                    log.warning("closing the PostgreSQL store: %s", exc)
            await self._pool.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ running ops
    async def run(self, fn: Callable[[psycopg.AsyncConnection[Any], PgTx], Awaitable[T]], *, write: bool) -> T:
        """Run ``fn`` and return its result; on the home loop directly, from another loop
        through the home loop (which must be running: see :meth:`usable_from`).

        A write joins the next write group (:class:`~agentbolt.store.postgres.group.WriteGroups`:
        one transaction for many ops, a savepoint each) and returns once committed. A read runs on an
        autocommit connection (each statement sees a consistent snapshot; no BEGIN/COMMIT
        round trips). See :meth:`_run` for what is retried."""
        if self._closed or self._loop is None:
            raise StoreUnavailableError("the PostgreSQL store is closed; start() it again to use it")
        if asyncio.get_running_loop() is self._loop:
            return await self._run_gated(fn, write)
        fut = asyncio.run_coroutine_threadsafe(self._run_gated(fn, write), self._loop)
        return await asyncio.wrap_future(fut)

    async def _run_gated(self, fn: Callable[[psycopg.AsyncConnection[Any], PgTx], Awaitable[T]], write: bool) -> T:
        if write:
            assert self.groups is not None
            return await self.groups.run(fn)
        # ops queue here (a cheap FIFO) rather than inside the pool, whose waiting costs
        # grow with the queue: 10,000 concurrent ops (one batch request) stay linear
        assert self._gate is not None
        async with self._gate:
            return await self._run(fn, write)

    async def _run(self, fn: Callable[[psycopg.AsyncConnection[Any], PgTx], Awaitable[T]], write: bool) -> T:
        """One op in its own transaction (a read: on an autocommit connection). Retries: a
        deadlock or serialization failure (rolled back: run again); a connection found dead
        before COMMIT was sent (PostgreSQL rolled the transaction back: safe to run again on
        a fresh connection). A connection lost *during* COMMIT is reported, not retried: the
        write may or may not have been stored."""
        assert self._pool is not None
        tries = 0
        while True:
            tries += 1
            tx = PgTx()
            try:
                async with self._pool.connection() as conn:
                    if not write:
                        return await fn(conn, tx)
                    try:
                        def op(_pipe: Any, conn: Any = conn, tx: PgTx = tx) -> Awaitable[Any]:
                            return fn(conn, tx)

                        value = await _write_transaction(conn, tx, self.channel, op)
                    finally:
                        await retire_if_refused(conn, tx)
            except _RETRYABLE:
                if tries >= _MAX_TRIES:
                    raise StoreUnavailableError(
                        f"PostgreSQL kept aborting this write as a deadlock ({tries} tries); try again"
                    ) from None
                await asyncio.sleep(0.002 * tries)
                continue
            except (psycopg.OperationalError, PoolTimeout) as exc:
                if tx.committing:
                    raise _lost_while_committing(exc) from exc
                if tries >= 3 or isinstance(exc, PoolTimeout):
                    raise translate_error(exc, "write" if write else "read") from exc
                await self._pool.check()  # drop every dead idle connection, then retry
                continue
            except psycopg.Error as exc:
                raise translate_error(exc, "write" if write else "read") from exc
            if tx.finished_rollout:
                self.notifier.notify()  # this process's waiters need not wait for the round trip
            return value

    # ------------------------------------------------------------------ listening
    async def _listen(self, listening: asyncio.Event) -> None:
        """Keep one connection LISTENing; wake the waiters on each notification, and once
        after every (re)connect (notifications sent meanwhile are lost). A quiet listener
        checks its connection every ``safety_poll`` seconds."""
        delay = 0.05
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.conninfo,
                    autocommit=True,
                    connect_timeout=max(1, round(self._connect_timeout)),
                    application_name=self.application_name,
                )
            except psycopg.OperationalError as exc:
                log.warning("PostgreSQL listener cannot connect (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            try:
                async with conn:
                    await conn.execute(f'LISTEN "{self.channel}"')
                    self.listener_connects += 1
                    listening.set()
                    self.notifier.notify()  # anything may have happened while not listening
                    delay = 0.05
                    while True:
                        async for _ in conn.notifies(timeout=self._safety_poll):
                            self.notifier.notify()
                        await conn.execute("SELECT 1")  # a quiet period: make sure the connection lives
            except (psycopg.Error, OSError) as exc:
                log.warning("PostgreSQL listener lost its connection (%s); reconnecting", exc)
                await asyncio.sleep(delay)
