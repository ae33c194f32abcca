"""Row changes of PostgreSQL writes, sent as ONE statement.

An op (or the ops of a write group run together) loads and locks its rows, applies the
lifecycle, and lists what changed as :class:`Change` values: a :class:`Shape` (table,
columns set, row key) and the row's values. :func:`run_all` sends them all as one
statement: one ``UPDATE ... FROM unnest(<one array per column>)`` per shape, several
shapes (and an insert, e.g. of spans) as data-modifying CTEs::

    WITH s0 AS (INSERT INTO spans ...),
         s1 AS (UPDATE attempts t SET status = u.c0, ... FROM unnest(%b, ...) AS u(...) WHERE t.claim_order = u.k0)
    UPDATE rollouts t SET ... FROM unnest(...) AS u(...) WHERE t.seq = u.k0

Why: each statement costs a server about 60-100 µs in psycopg (and PostgreSQL its own
share), whatever it does; twenty finished attempts are one statement here, not sixty.
One statement may not change a row twice (PostgreSQL would keep one of the changes):
callers list each row once, and a list that names a row twice runs one change at a time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

__all__ = ["Change", "Shape", "Statement", "run_all", "shape"]

Conn = Any  # psycopg.AsyncConnection

Statement = tuple[str, tuple[Any, ...]]
"""A statement with its positional parameters."""

_TYPES = {
    "status": "text",
    "updated_at": "float8",
    "start_time": "float8",
    "end_time": "float8",
    "attempt_count": "int",
    "latest_attempt_id": "text",
    "reward": "float8",
    "resources_version": "int",
    "metadata": "text",
    "error": "text",
    "last_heartbeat_time": "float8",
    "next_span_seq": "bigint",
    "deadline": "float8",
    "seq": "bigint",
    "claim_order": "bigint",
    "worker_id": "text",
    "current_attempt_id": "text",
}
"""The SQL type of each column a change may name."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What a change sets: ``columns`` of ``table`` (or the fixed ``assign``), in the row
    whose ``key`` columns have the given values."""

    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    assign: str = ""
    """A fixed SET list used instead of ``columns`` (e.g. a worker going idle)."""

    def sql(self) -> str:
        """The statement changing many rows of this shape: one array parameter per column."""
        names = [f"c{i}" for i in range(len(self.columns))] + [f"k{i}" for i in range(len(self.key))]
        arrays = ", ".join(f"%b::{_TYPES[c]}[]" for c in (*self.columns, *self.key))
        sets = self.assign or ", ".join(f"{c} = u.c{i}" for i, c in enumerate(self.columns))
        where = " AND ".join(f"t.{c} = u.k{i}" for i, c in enumerate(self.key))
        return f"UPDATE {self.table} t SET {sets} FROM unnest({arrays}) AS u({', '.join(names)}) WHERE {where}"

    def floats(self) -> tuple[bool, ...]:
        return tuple(_TYPES[c] == "float8" for c in (*self.columns, *self.key))


@functools.cache
def shape(table: str, columns: tuple[str, ...], key: tuple[str, ...], assign: str = "") -> Shape:
    """The (cached) shape of these columns and key."""
    return Shape(table, columns, key, assign)


@functools.cache
def _sql(shape: Shape) -> tuple[str, tuple[bool, ...]]:
    return shape.sql(), shape.floats()


@dataclass(frozen=True, slots=True)
class Change:
    """One row's change: the values of its shape's columns, then of its key."""

    shape: Shape
    values: tuple[Any, ...]

    @property
    def row(self) -> tuple[Any, ...]:
        return (self.shape.table, *self.values[len(self.shape.columns) :])


def _arrays(shape: Shape, rows: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    """One list per column; floats as floats (a list must be of one type to go in binary)."""
    _, floats = _sql(shape)
    return tuple(
        [None if v is None else float(v) for v in col] if is_float else list(col)
        for col, is_float in zip(zip(*rows, strict=True), floats, strict=True)
    )


async def run_all(conn: Conn, changes: list[Change], first: Statement | None = None) -> None:
    """Send ``first`` (an insert, say) and ``changes`` as one statement (see the module)."""
    rows = [c.row for c in changes]
    if len(set(rows)) < len(rows):  # a row changed twice: one change at a time, in order
        if first is not None:
            await conn.execute(*first)
        for c in changes:
            await run_all(conn, [c])
        return
    by_shape: dict[Shape, list[tuple[Any, ...]]] = {}
    for c in changes:
        by_shape.setdefault(c.shape, []).append(c.values)
    parts: list[Statement] = [] if first is None else [first]
    parts.extend((_sql(s)[0], _arrays(s, values)) for s, values in by_shape.items())
    if not parts:
        return
    sql, params = parts[-1]
    if len(parts) > 1:
        sql = "WITH " + ", ".join(f"s{i} AS ({q})" for i, (q, _) in enumerate(parts[:-1])) + " " + sql
        params = tuple(p for _, ps in parts for p in ps)
    await conn.execute(sql, params)
