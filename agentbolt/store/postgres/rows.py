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


_SAVE_ROLLOUT = f"UPDATE rollouts SET {', '.join(f'{c} = %s' for c in ROLLOUT_STATE_COLUMNS)} WHERE seq = %s"


class PgRollout(LoadedRolloutRow):
    """A rollout read (and locked) inside a write transaction."""

    __slots__ = ()

    def update(self, *, metadata_changed: bool = False) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements that write back what changed since loading (or the last call)."""
        self.check_metadata_loaded(metadata_changed)
        out: list[tuple[str, tuple[Any, ...]]] = []
        state = rollout_state(self.model)
        if state != self.state:
            out.append((_SAVE_ROLLOUT, (*state, self.seq)))
            self.state = state
        if metadata_changed:
            out.append(("UPDATE rollouts SET metadata = %s WHERE seq = %s", (dumps(self.model.metadata), self.seq)))
        return out

    async def save(self, conn: Any, *, metadata_changed: bool = False) -> None:
        for sql, params in self.update(metadata_changed=metadata_changed):
            await conn.execute(sql, params)


_SAVE_ATTEMPT = f"UPDATE attempts SET {', '.join(f'{c} = %s' for c in ATTEMPT_STATE_COLUMNS)} WHERE claim_order = %s"


class PgAttempt(LoadedAttemptRow):
    """An attempt read (and locked) inside a write transaction (``key``: its ``claim_order``)."""

    __slots__ = ()

    def update(self, rollout: Rollout, *, metadata_changed: bool = False) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements that write back what changed; the deadline follows status and
        heartbeat."""
        a = self.model
        out: list[tuple[str, tuple[Any, ...]]] = []
        state = attempt_state(a, self.next_span_seq, attempt_deadline(rollout, a))
        if state != self.state:
            out.append((_SAVE_ATTEMPT, (*state, self.key)))
            self.state = state
        if a.error is not self.error:
            error = None if a.error is None else dumps(a.error)
            out.append(("UPDATE attempts SET error = %s WHERE claim_order = %s", (error, self.key)))
            self.error = a.error
        if metadata_changed:
            out.append(("UPDATE attempts SET metadata = %s WHERE claim_order = %s", (dumps(a.metadata), self.key)))
        return out

    async def save(self, conn: Any, rollout: Rollout, *, metadata_changed: bool = False) -> None:
        for sql, params in self.update(rollout, metadata_changed=metadata_changed):
            await conn.execute(sql, params)
