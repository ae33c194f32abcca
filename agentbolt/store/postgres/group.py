"""Group commit for :class:`~agentbolt.store.postgres.PostgresStore` writes.

Every write op of a store instance is a function of a connection. Run one by one, each
is its own transaction: a BEGIN, its statements, a COMMIT (a WAL flush and a round
trip). :class:`WriteGroups` collects the write ops that are waiting (a ``/v1/batch``
request hands the server dozens at once) and runs up to ``max_ops`` of them in ONE
transaction on one connection, in arrival order, then answers every caller::

    BEGIN; <op 1>; <op 2>; ...; COMMIT          -- the common case: no op fails

    BEGIN                                        -- after an op failed: the group again,
      SAVEPOINT op; <op 1>; RELEASE SAVEPOINT op --   a failing op rolls back to its
      SAVEPOINT op; <op 2>; ROLLBACK TO op ...   --   savepoint and fails alone
    COMMIT

* Callers are answered only after the COMMIT: an acknowledged write is durable.
* An op that fails fails alone, with the error it raises on its own. The first run goes
  without savepoints (they cost two statements and a round trip per op, and ops rarely
  fail); if any op fails, the whole group is rolled back (nothing stored) and run again
  with a savepoint per op.
* Up to ``max_groups`` groups run at once, each on its own pool connection. Ops that
  arrive while every group is busy wait and form the next group (no timer: an op on an
  idle store starts at once, alone, with no savepoint).
* A group that PostgreSQL aborts as a deadlock or serialization failure committed
  nothing: it runs again once, then each of its ops in a transaction of its own (the
  single-op path, with its own retries), so a recurring conflict cannot starve it. A
  connection lost before COMMIT: each op on its own too. Lost during COMMIT: every op
  of the group gets the "may or may not have been stored" error.
* Ops that carry a ``together`` function run as one call of it, at the place of the
  first of them: the claims of a group are one statement
  (:mod:`agentbolt.store.postgres.claims`). With savepoints (after a failure) each op
  runs alone again, so that a failing claim fails alone too.
* Row locks are held until the group commits, so groups stay short (``max_ops``);
  ``FOR UPDATE SKIP LOCKED`` claims stay exact: a claimer in another group or server
  skips the rows a group has taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import psycopg
import psycopg.errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentbolt.store.errors import StoreUnavailableError
from agentbolt.store.notify import ChangeNotifier
from agentbolt.store.postgres.tx import (
    RETRYABLE,
    PgTx,
    lost_while_committing,
    retire_if_refused,
    translate_error,
    write_transaction,
)
from agentbolt.store.sql.op_results import settle

__all__ = ["JoinableOp", "WriteGroups", "WriteOp"]

log = logging.getLogger("agentbolt.store.postgres")

WriteOp = Callable[[psycopg.AsyncConnection[Any], PgTx], Awaitable[Any]]


@runtime_checkable
class JoinableOp(Protocol):
    """A write op a group may run in one call with others of its kind
    (:class:`~agentbolt.store.postgres.together.BoundOp`): ``together(conn, tx, ops)``
    returns one value per op; None when the op always runs alone."""

    together: Callable[[Any, PgTx, Sequence[Any]], Awaitable[list[Any]]] | None

    def __call__(self, conn: Any, tx: PgTx, /) -> Awaitable[Any]: ...

_Item = tuple[WriteOp, "asyncio.Future[Any]"]
_GROUP_TRIES = 2  # as a group; then each op on its own


class _OpFailed(Exception):
    """An op failed in a group run without savepoints: run the group again with them."""


class _GroupAborted(Exception):
    """The group transaction failed before COMMIT: none of its ops was stored."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class WriteGroups:
    """Collects write ops on the engine's event loop and commits them in groups."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        gate: asyncio.Semaphore,
        *,
        channel: str,
        notifier: ChangeNotifier,
        run_alone: Callable[[WriteOp], Awaitable[Any]],
        max_groups: int,
        max_ops: int,
    ) -> None:
        self._pool = pool
        self._gate = gate
        self._channel = channel
        self._notifier = notifier
        self._run_alone = run_alone  # one op in its own transaction, with the engine's retries
        self.max_groups = max_groups
        self.max_ops = max_ops
        self._pending: deque[_Item] = deque()
        self._running = 0  # group tasks alive
        self._collecting = 0  # of which, not yet holding a batch: new ops will join theirs
        self._tasks: set[asyncio.Task[None]] = set()
        self.transactions = 0
        """Group transactions committed (of two ops or more)."""
        self.ops = 0
        """Ops those transactions ran (stored, or rolled back to their savepoint)."""
        self.reruns = 0
        """Groups run again with a savepoint per op, after an op failed."""
        self.fallbacks = 0
        """Groups that ran again op by op (after a deadlock or a lost connection)."""

    async def run(self, fn: WriteOp) -> Any:
        """Run ``fn`` in the next group; return its value once the group has committed."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((fn, fut))
        if self._collecting == 0 and self._running < self.max_groups:
            self._running += 1
            self._collecting += 1
            task = asyncio.create_task(self._serve(), name="agentbolt-pg-group")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await fut  # cancelled by its caller before its group starts: it never runs

    async def drain(self) -> None:
        """Wait until every op submitted so far has been answered."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ------------------------------------------------------------------ the group tasks
    async def _serve(self) -> None:
        collecting = True
        try:
            while True:
                async with self._gate:
                    batch = self._take()
                    self._collecting -= 1
                    collecting = False
                    if not batch:
                        return
                    await self._commit(batch)
                if not self._pending:
                    return
                self._collecting += 1
                collecting = True
        finally:
            if collecting:
                self._collecting -= 1
            self._running -= 1

    def _take(self) -> list[_Item]:
        batch: list[_Item] = []
        while self._pending and len(batch) < self.max_ops:
            item = self._pending.popleft()
            if not item[1].done():  # its caller gave up before it started
                batch.append(item)
        return batch

    async def _commit(self, batch: list[_Item]) -> None:
        try:
            if len(batch) == 1:  # alone: no savepoint needed
                fn, fut = batch[0]
                try:
                    settle(fut, True, await self._run_alone(fn))
                except Exception as exc:  # noqa: BLE001 - the op's own error, for its caller
                    settle(fut, False, exc)
                return
            savepoints = False  # first without: ops rarely fail, and savepoints cost statements
            tries = 0
            while True:
                tries += 1
                try:
                    results, tx = await self._transaction(batch, savepoints)
                except _OpFailed:
                    savepoints = True
                    self.reruns += 1
                    continue
                except _GroupAborted as aborted:
                    if isinstance(aborted.cause, RETRYABLE) and tries < _GROUP_TRIES:
                        await asyncio.sleep(0.002 * tries)
                        continue
                    log.debug("write group of %d ops aborted (%s); running them one by one", len(batch), aborted)
                    self.fallbacks += 1
                    if isinstance(aborted.cause, psycopg.OperationalError):
                        await self._pool.check()  # drop dead idle connections first
                    await self._one_by_one(batch)
                    return
                self.transactions += 1
                self.ops += len(batch)
                if tx.finished_rollout:
                    self._notifier.notify()  # this process's waiters need not wait for the round trip
                for (_, fut), (ok, value) in zip(batch, results, strict=True):
                    settle(fut, ok, value)
                return
        except BaseException as exc:  # the group failed as a whole: nobody's op is left unanswered
            err = exc if isinstance(exc, StoreUnavailableError) else translate_error(exc, "write")
            if not isinstance(err, Exception):
                err = StoreUnavailableError("the PostgreSQL store stopped while this write was running; retry it")
            for _, fut in batch:
                settle(fut, False, err)
            if not isinstance(exc, Exception):
                raise

    async def _one_by_one(self, batch: list[_Item]) -> None:
        for fn, fut in batch:
            try:
                settle(fut, True, await self._run_alone(fn))
            except Exception as exc:  # noqa: BLE001 - the op's own error, for its caller
                settle(fut, False, exc)

    async def _transaction(self, batch: list[_Item], savepoints: bool) -> tuple[list[tuple[bool, Any]], PgTx]:
        """One transaction for the batch. With ``savepoints``, each op runs inside its own
        (a failing op rolls back alone); without, the first failing op rolls back the whole
        group (:class:`_OpFailed`: nothing was stored) — the common case of no failure
        saves two statements and a round trip per op. Raises :class:`_GroupAborted` when
        nothing was committed, :class:`StoreUnavailableError` when the COMMIT's fate is
        unknown."""
        tx = PgTx()
        results: list[tuple[bool, Any]] = []

        async def body(pipe: Any) -> None:
            if savepoints:
                for fn, _ in batch:
                    results.append(await _run_op(conn, pipe, fn, tx))
                return
            together = _together([fn for fn, _ in batch])
            done: dict[int, tuple[bool, Any]] = {}
            for i, (fn, _) in enumerate(batch):
                if i in done:
                    results.append(done.pop(i))
                    continue
                members = together.get(i)
                if members is None:
                    results.append(await _run_bare(conn, fn, tx))
                    continue
                _, values = await _run_bare(conn, _joint(fn, [batch[j][0] for j in members]), tx)
                done.update((j, (True, value)) for j, value in zip(members, values, strict=True))
                results.append(done.pop(i))

        try:
            # an op costs its reads plus one round trip (see write_transaction)
            async with self._pool.connection() as conn:
                threshold = conn.prepare_threshold
                if savepoints:  # errors are expected here: no statement preparing behind them
                    conn.prepare_threshold = None
                try:
                    await write_transaction(conn, tx, self._channel, body)
                finally:
                    conn.prepare_threshold = threshold
                    await retire_if_refused(conn, tx)
        except RETRYABLE as exc:
            raise _GroupAborted(exc) from exc
        except (psycopg.OperationalError, PoolTimeout) as exc:
            if tx.committing:
                raise lost_while_committing(exc) from exc
            if isinstance(exc, PoolTimeout):
                raise translate_error(exc, "write") from exc
            raise _GroupAborted(exc) from exc
        except psycopg.Error as exc:  # PostgreSQL refused the group (or its COMMIT): nothing was stored
            raise _GroupAborted(exc) from exc
        return results, tx


def _together(ops: list[WriteOp]) -> dict[int, list[int]]:
    """Ops that run as one call: :class:`JoinableOp` ones with the same ``together``
    function (claims, ...), at the place of the first of them. Maps that first op's index
    to the indices of all of them (two or more)."""
    by_fn: dict[Any, list[int]] = {}
    for i, fn in enumerate(ops):
        if isinstance(fn, JoinableOp) and fn.together is not None:
            by_fn.setdefault(fn.together, []).append(i)
    return {members[0]: members for members in by_fn.values() if len(members) > 1}


def _joint(first: WriteOp, ops: list[WriteOp]) -> Callable[[Any, PgTx], Awaitable[list[Any]]]:
    """The op running ``ops`` together: ``first.together(conn, tx, ops)``, one value each."""
    together = first.together if isinstance(first, JoinableOp) else None
    assert together is not None, "only ops that _together joined run as one"

    def run(conn: Any, tx: PgTx) -> Awaitable[list[Any]]:
        return together(conn, tx, ops)

    return run


async def _run_bare(conn: Any, fn: WriteOp, tx: PgTx) -> tuple[bool, Any]:
    """One op without a savepoint: its failure (or a queued statement's, seen here or by a
    later op) fails the group, to be run again with savepoints."""
    try:
        return True, await fn(conn, tx)
    except Exception as exc:
        tx.sql_error = tx.sql_error or isinstance(exc, psycopg.Error)
        if isinstance(exc, (*RETRYABLE, psycopg.OperationalError)):
            raise
        raise _OpFailed(str(exc)) from exc


async def _run_op(conn: Any, pipe: Any, fn: WriteOp, tx: PgTx) -> tuple[bool, Any]:
    """One op inside its savepoint: ``(True, value)``, or ``(False, error)`` after rolling
    back to the savepoint. Errors that doom the whole group propagate."""
    await conn.execute("SAVEPOINT op")
    try:
        value = await fn(conn, tx)
        await conn.execute("RELEASE SAVEPOINT op")
        await pipe.sync()  # the op's own queued statements report their errors here, to it
        return True, value
    except Exception as exc:
        tx.sql_error = tx.sql_error or isinstance(exc, psycopg.Error)
        if isinstance(exc, (*RETRYABLE, psycopg.OperationalError)) or conn.closed or conn.broken:
            raise
        with contextlib.suppress(psycopg.Error):  # what the op left queued fails with it
            await pipe.sync()
        await conn.execute("ROLLBACK TO SAVEPOINT op")
        await conn.execute("RELEASE SAVEPOINT op")
        await pipe.sync()
        return False, translate_error(exc, "write")
