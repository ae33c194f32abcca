"""Rows ↔ models for :class:`~agentbolt.store.sqlite.SqliteStore`.

The conversions themselves are shared with PostgreSQL in :mod:`agentbolt.store.sql.rows`
(re-exported here). What is SQLite's own: the column lists (attempts keyed by ``rowid``)
and loaded rows that write back only the columns that changed.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agentbolt.store.sql.rows import (
    ATTEMPT_FIELDS,
    ATTEMPT_STATE_COLUMNS,
    RESOURCES_COLUMNS,
    ROLLOUT_COLUMNS,
    ROLLOUT_STATE_COLUMNS,
    WORKER_COLUMNS,
    LoadedAttemptRow,
    LoadedRolloutRow,
    attempt_deadline,
    attempt_from_row,
    attempt_state,
    dump_span,
    dumps,
    resources_from_row,
    rollout_from_row,
    rollout_state,
    span_from_data,
    worker_from_row,
)
from agentbolt.types import Rollout

__all__ = [
    "ATTEMPT_COLUMNS",
    "LIGHT_ROLLOUT_COLUMNS",
    "RESOURCES_COLUMNS",
    "ROLLOUT_COLUMNS",
    "WORKER_COLUMNS",
    "LoadedAttempt",
    "LoadedRollout",
    "attempt_deadline",
    "attempt_from_row",
    "dump_span",
    "dumps",
    "resources_from_row",
    "rollout_from_row",
    "span_from_data",
    "worker_from_row",
]

# ---------------------------------------------------------------------------- rollouts
LIGHT_ROLLOUT_COLUMNS = ROLLOUT_COLUMNS.replace("input,", "'null',").replace("metadata,", "'{}',")
"""Like :data:`ROLLOUT_COLUMNS` without ``input`` and ``metadata`` (read as null / {}):
for ops that only move the rollout's status and never return it. Inputs can be large."""


def _changed_columns(names: tuple[str, ...], old: tuple[Any, ...], new: tuple[Any, ...]) -> tuple[str, list[Any]]:
    """``SET`` clause and values for the columns whose value changed. SQLite rewrites
    every index on a column named in ``SET``, so unchanged columns are left out."""
    cols: list[str] = []
    values: list[Any] = []
    for name, a, b in zip(names, old, new, strict=True):
        if a != b or type(a) is not type(b):
            cols.append(name)
            values.append(b)
    return ", ".join(f"{c} = ?" for c in cols), values


class LoadedRollout(LoadedRolloutRow):
    """A rollout read inside a write transaction, with what is needed to write it back."""

    __slots__ = ()

    def save(self, conn: sqlite3.Connection, *, metadata_changed: bool = False) -> None:
        """Write back the columns that changed since loading (or the last save)."""
        self.check_metadata_loaded(metadata_changed)
        state = rollout_state(self.model)
        if state != self.state:
            assignments, values = _changed_columns(ROLLOUT_STATE_COLUMNS, self.state, state)
            conn.execute(f"UPDATE rollouts SET {assignments} WHERE seq = ?", (*values, self.seq))
            self.state = state
        if metadata_changed:
            conn.execute("UPDATE rollouts SET metadata=? WHERE seq=?", (dumps(self.model.metadata), self.seq))


# ---------------------------------------------------------------------------- attempts
ATTEMPT_COLUMNS = ", ".join(("rowid", *ATTEMPT_FIELDS))


class LoadedAttempt(LoadedAttemptRow):
    """An attempt read inside a write transaction (``key``: its ``rowid``)."""

    __slots__ = ()

    def save(self, conn: sqlite3.Connection, rollout: Rollout, *, metadata_changed: bool = False) -> None:
        """Write back the columns that changed; the deadline follows status and heartbeat."""
        a = self.model
        state = attempt_state(a, self.next_span_seq, attempt_deadline(rollout, a))
        if state != self.state:
            assignments, values = _changed_columns(ATTEMPT_STATE_COLUMNS, self.state, state)
            conn.execute(f"UPDATE attempts SET {assignments} WHERE rowid = ?", (*values, self.key))
            self.state = state
        if a.error is not self.error:
            conn.execute(
                "UPDATE attempts SET error=? WHERE rowid=?",
                (None if a.error is None else dumps(a.error), self.key),
            )
            self.error = a.error
        if metadata_changed:
            conn.execute("UPDATE attempts SET metadata=? WHERE rowid=?", (dumps(a.metadata), self.key))
