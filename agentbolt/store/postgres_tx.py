"""What a :class:`~agentbolt.store.postgres.PostgresStore` transaction shares with its
ops, and how psycopg's errors become the store's typed errors."""

from __future__ import annotations

import psycopg
import psycopg.errors
from psycopg_pool import PoolTimeout

from agentbolt.store.errors import InvalidRequestError, StoreError, StoreUnavailableError

__all__ = ["RETRYABLE", "PgTx", "retire_if_refused", "translate_error"]

RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
"""Errors after which PostgreSQL has rolled the transaction back: run it again."""


class PgTx:
    """What one transaction's ops tell the engine: wake waiters after the commit; and,
    set by the engine, that PostgreSQL refused a statement (``sql_error``)."""

    __slots__ = ("finished_rollout", "sql_error")

    def __init__(self) -> None:
        self.finished_rollout = False
        self.sql_error = False


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
