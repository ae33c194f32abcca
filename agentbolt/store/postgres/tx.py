"""What a :class:`~agentbolt.store.postgres.PostgresStore` transaction shares with its
ops, and how psycopg's errors become the store's typed errors."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import PoolTimeout

from agentbolt.store.errors import (
    InvalidRequestError,
    StoreError,
    StoreUnavailableError,
)

__all__ = ["RETRYABLE", "PgTx", "lost_while_committing", "retire_if_refused", "translate_error", "write_transaction"]

T = TypeVar("T")

RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
"""Errors after which PostgreSQL has rolled the transaction back: run it again."""


class PgTx:
    """What one transaction's ops tell the engine: wake waiters after the commit; and,
    set by the engine, that PostgreSQL refused a statement (``sql_error``) and that the
    COMMIT was sent (``committing``: a connection lost now leaves the write's fate unknown)."""

    __slots__ = ("committing", "finished_rollout", "sql_error")

    def __init__(self) -> None:
        self.finished_rollout = False
        self.sql_error = False
        self.committing = False


async def write_transaction(
    conn: psycopg.AsyncConnection[Any], tx: PgTx, channel: str, body: Callable[[Any], Awaitable[T]]
) -> T:
    """Run ``body(pipeline)`` in one write transaction on ``conn``, and commit.

    Pipeline mode: statements whose results are not read are queued and sent with the
    next read, so BEGIN travels with the first query and the writes with COMMIT (a
    heartbeat is two round trips, not six). A rollout finished by the transaction is
    announced with ``pg_notify`` on ``channel``, delivered to every listening server on
    commit. A failing body rolls back; a psycopg error sets ``tx.sql_error`` (see
    :func:`retire_if_refused`, which the caller runs once done with ``conn``)."""
    try:
        async with conn.pipeline() as pipe:
            await conn.execute("BEGIN")
            try:
                value = await body(pipe)
                if tx.finished_rollout:
                    await conn.execute("SELECT pg_notify(%s, 'finished')", (channel,))
            except BaseException:
                if not conn.closed:
                    with contextlib.suppress(psycopg.Error):
                        await pipe.sync()
                    with contextlib.suppress(psycopg.Error):
                        await conn.execute("ROLLBACK")
                raise
            tx.committing = True
            await conn.execute("COMMIT")
    except psycopg.Error:
        tx.sql_error = True
        raise
    return value


def lost_while_committing(exc: BaseException) -> StoreUnavailableError:
    """The error for a connection lost after COMMIT was sent: not retried, since the write
    may or may not have been stored."""
    return StoreUnavailableError(
        f"the connection to PostgreSQL was lost while committing ({str(exc).strip()}): "
        "the write may or may not have been stored; check before sending it again"
    )


async def retire_if_refused(conn: psycopg.AsyncConnection, tx: PgTx) -> None:
    """Close ``conn`` (the pool replaces it) after PostgreSQL refused a statement in
    pipeline mode: statements queued behind the error were skipped, and psycopg may then
    believe that some of them were prepared ("prepared statement ... does not exist" on
    the connection's next use). Rare, so a fresh connection is the safe answer."""
    if tx.sql_error and not conn.closed:
        await conn.close()


def translate_error(exc: BaseException, where: str) -> BaseException:
    """psycopg's errors as the store's typed errors (StoreErrors pass through)."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, psycopg.errors.UntranslatableCharacter | psycopg.errors.CharacterNotInRepertoire):
        return InvalidRequestError(f"PostgreSQL cannot store this text: {exc}")
    if isinstance(exc, psycopg.DataError | psycopg.errors.ProgramLimitExceeded | psycopg.errors.StatementTooComplex):
        return InvalidRequestError(f"PostgreSQL refused the value: {str(exc).strip()}")
    if isinstance(exc, psycopg.OperationalError | PoolTimeout):
        return StoreUnavailableError(f"PostgreSQL is unavailable ({where}): {str(exc).strip()}")
    if isinstance(exc, psycopg.Error):
        return StoreError(f"PostgreSQL error ({where}): {type(exc).__name__}: {str(exc).strip()}")
    return exc
