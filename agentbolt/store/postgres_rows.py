"""Rows ↔ models for :class:`~agentbolt.store.postgres.PostgresStore`.

The tables hold the same columns as SQLite's (JSON text for inputs, configs and
metadata), so rows become models through the shared converters of
:mod:`agentbolt.store.sqlite_rows`. What is PostgreSQL's own: column lists usable in
joins (``r.``/``a.`` prefixes), and loaded rows that write back their changed state with
psycopg placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentbolt.store.sqlite_rows import (
    attempt_deadline,
    attempt_from_row,
    dumps,
    rollout_from_row,
)
from agentbolt.types import Attempt, ErrorInfo, Rollout

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

_ROLLOUT = (
    "seq",
    "rollout_id",
    "input",
    "mode",
    "status",
    "resources_version",
    "config",
    "metadata",
    "created_at",
    "updated_at",
    "start_time",
    "end_time",
    "attempt_count",
    "latest_attempt_id",
    "reward",
)
_ATTEMPT = (
    "claim_order",
    "attempt_id",
    "rollout_id",
    "sequence_id",
    "worker_id",
    "status",
    "start_time",
    "end_time",
    "last_heartbeat_time",
    "resources_version",
    "error",
    "metadata",
    "reward",
    "next_span_seq",
)
ROLLOUT_WIDTH = len(_ROLLOUT)
ATTEMPT_WIDTH = len(_ATTEMPT)


def rollout_columns(prefix: str = "", *, light: bool = False) -> str:
    """The columns :func:`~agentbolt.store.sqlite_rows.rollout_from_row` reads; ``light``
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
    """The columns :func:`~agentbolt.store.sqlite_rows.attempt_from_row` reads (the first
    is ``claim_order``, the attempt's row key here)."""
    return ", ".join(prefix + c for c in _ATTEMPT)


async def fetchone(conn: Any, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    """The first row of ``sql`` (None when there is none)."""
    cur = await conn.execute(sql, params)
    return await cur.fetchone()


async def fetchall(conn: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Every row of ``sql``."""
    cur = await conn.execute(sql, params)
    return await cur.fetchall()


def span_json(data: str) -> tuple[str | None, str | None]:
    """``(data, raw)`` column values for a span's JSON: JSONB unless the text holds a NUL
    (``\\u0000``), which JSONB refuses; then it is kept intact as text."""
    if "\\u0000" in data:
        return None, data
    return data, None


def _rollout_state(r: Rollout) -> tuple[Any, ...]:
    return (
        r.status.value,
        r.updated_at,
        r.start_time,
        r.end_time,
        r.attempt_count,
        r.latest_attempt_id,
        r.reward,
        r.resources_version,
    )


_SAVE_ROLLOUT = (
    "UPDATE rollouts SET status = %s, updated_at = %s, start_time = %s, end_time = %s, attempt_count = %s, "
    "latest_attempt_id = %s, reward = %s, resources_version = %s WHERE seq = %s"
)


@dataclass(slots=True)
class PgRollout:
    """A rollout read (and locked) inside a write transaction."""

    seq: int
    model: Rollout
    state: tuple[Any, ...]
    light: bool = False

    @classmethod
    def from_row(cls, row: tuple[Any, ...], *, light: bool = False) -> PgRollout:
        model = rollout_from_row(row)
        return cls(row[0], model, _rollout_state(model), light)

    def update(self, *, metadata_changed: bool = False) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements that write back what changed since loading (or the last call)."""
        if metadata_changed and self.light:
            raise RuntimeError("bug: saving the metadata of a rollout loaded without it")
        out: list[tuple[str, tuple[Any, ...]]] = []
        state = _rollout_state(self.model)
        if state != self.state:
            out.append((_SAVE_ROLLOUT, (*state, self.seq)))
            self.state = state
        if metadata_changed:
            out.append(("UPDATE rollouts SET metadata = %s WHERE seq = %s", (dumps(self.model.metadata), self.seq)))
        return out

    async def save(self, conn: Any, *, metadata_changed: bool = False) -> None:
        for sql, params in self.update(metadata_changed=metadata_changed):
            await conn.execute(sql, params)


def _attempt_state(a: Attempt, next_span_seq: int, deadline: float | None) -> tuple[Any, ...]:
    return (a.status.value, a.end_time, a.last_heartbeat_time, a.reward, next_span_seq, deadline)


_SAVE_ATTEMPT = (
    "UPDATE attempts SET status = %s, end_time = %s, last_heartbeat_time = %s, reward = %s, "
    "next_span_seq = %s, deadline = %s WHERE claim_order = %s"
)


@dataclass(slots=True)
class PgAttempt:
    """An attempt read (and locked) inside a write transaction, with its span counter."""

    key: int
    model: Attempt
    next_span_seq: int
    state: tuple[Any, ...]
    error: ErrorInfo | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...], rollout: Rollout) -> PgAttempt:
        model = attempt_from_row(row)
        state = _attempt_state(model, row[13], attempt_deadline(rollout, model))
        return cls(row[0], model, row[13], state, model.error)

    def update(self, rollout: Rollout, *, metadata_changed: bool = False) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements that write back what changed; the deadline follows status and
        heartbeat."""
        a = self.model
        out: list[tuple[str, tuple[Any, ...]]] = []
        state = _attempt_state(a, self.next_span_seq, attempt_deadline(rollout, a))
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
