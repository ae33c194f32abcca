"""Rows ↔ models for :class:`~agentbolt.store.postgres.PostgresStore`.

The tables hold the same columns as SQLite's (JSON text for inputs, configs and
metadata), so rows become models through the shared converters of
:mod:`agentbolt.store.sql.rows`. What is PostgreSQL's own: column lists usable in
joins (``r.``/``a.`` prefixes), and loaded rows that write back their changed state with
psycopg placeholders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentbolt.store.postgres.row_changes import Change, shape
from agentbolt.store.sql.rows import (
    ATTEMPT_FIELDS,
    ATTEMPT_STATE_COLUMNS,
    ROLLOUT_FIELDS,
    ROLLOUT_STATE_COLUMNS,
    LoadedAttemptRow,
    LoadedRolloutRow,
    attempt_deadline,
    attempt_state,
    dumps,
    rollout_state,
)
from agentbolt.types import Rollout

__all__ = [
    "ATTEMPT_WIDTH",
    "ROLLOUT_WIDTH",
    "PgAttempt",
    "PgRollout",
    "attempt_columns",
    "fetchall",
    "fetchone",
    "rollout_columns",
    "span_json",
]

_ROLLOUT = ROLLOUT_FIELDS
_ATTEMPT = ("claim_order", *ATTEMPT_FIELDS)
ROLLOUT_WIDTH = len(_ROLLOUT)
ATTEMPT_WIDTH = len(_ATTEMPT)


def rollout_columns(prefix: str = "", *, light: bool = False) -> str:
    """The columns :func:`~agentbolt.store.sql.rows.rollout_from_row` reads; ``light``
    reads input and metadata as placeholders (for ops that only move the status)."""
    cols = []
    for c in _ROLLOUT:
        if light and c == "input":
            cols.append("'null'::text")
        elif light and c == "metadata":
            cols.append("'{}'::text")
        else:
            cols.append(prefix + c)
    return ", ".join(cols)


def attempt_columns(prefix: str = "") -> str:
    """The columns :func:`~agentbolt.store.sql.rows.attempt_from_row` reads (the first
    is ``claim_order``, the attempt's row key here)."""
    return ", ".join(prefix + c for c in _ATTEMPT)


async def fetchone(conn: Any, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> tuple[Any, ...] | None:
    """The first row of ``sql`` (None when there is none)."""
    cur = await conn.execute(sql, params)
    return await cur.fetchone()


async def fetchall(conn: Any, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
    """Every row of ``sql``."""
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


def span_json(data: str) -> tuple[str | None, str | None]:
    """``(data, raw)`` column values for a span's JSON: JSONB unless the text holds a NUL
    (``\\u0000``), which JSONB refuses; then it is kept intact as text."""
    if "\\u0000" in data:
        return None, data
    return data, None


class PgRollout(LoadedRolloutRow):
    """A rollout read (and locked) inside a write transaction."""

    __slots__ = ()

    def update(self, *, metadata_changed: bool = False) -> list[Change]:
        """The change (at most one: the row once) that writes back what changed since
        loading (or the last call); run with :func:`~agentbolt.store.postgres.row_changes.run_all`."""
        self.check_metadata_loaded(metadata_changed)
        columns: tuple[str, ...] = ()
        values: tuple[Any, ...] = ()
        state = rollout_state(self.model)
        if state != self.state:
            columns, values = ROLLOUT_STATE_COLUMNS, state
            self.state = state
        if metadata_changed:
            columns, values = (*columns, "metadata"), (*values, dumps(self.model.metadata))
        if not columns:
            return []
        return [Change(shape("rollouts", columns, ("seq",)), (*values, self.seq))]


class PgAttempt(LoadedAttemptRow):
    """An attempt read (and locked) inside a write transaction (``key``: its ``claim_order``)."""

    __slots__ = ()

    def update(self, rollout: Rollout, *, metadata_changed: bool = False) -> list[Change]:
        """The change (at most one) that writes back what changed; the deadline follows
        status and heartbeat."""
        a = self.model
        columns: tuple[str, ...] = ()
        values: tuple[Any, ...] = ()
        state = attempt_state(a, self.next_span_seq, attempt_deadline(rollout, a))
        if state != self.state:
            columns, values = ATTEMPT_STATE_COLUMNS, state
            self.state = state
        if a.error is not self.error:
            columns, values = (*columns, "error"), (*values, None if a.error is None else dumps(a.error))
            self.error = a.error
        if metadata_changed:
            columns, values = (*columns, "metadata"), (*values, dumps(a.metadata))
        if not columns:
            return []
        return [Change(shape("attempts", columns, ("claim_order",)), (*values, self.key))]
