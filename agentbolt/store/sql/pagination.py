"""Keyset pagination in SQL, shared by :mod:`~agentbolt.store.sqlite.reads` and
:mod:`~agentbolt.store.postgres.reads`.

Ordering and cursors follow :class:`~agentbolt.store.memory.MemoryStore`: a page ends
where the next starts *strictly after* the last row's sort key, ``None`` sorts before
every value (after every value when descending), and ties are broken by enqueue order
(``created_at``, ``seq``) or by id. The two dialects differ only in what
:class:`SqlDialect` names: the placeholder, a cast, whether ``ORDER BY`` must place NULLs,
and how far cursor numbers are checked before they become parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentbolt.store.errors import InvalidRequestError
from agentbolt.store.pagination import encode_cursor
from agentbolt.store.sql.rows import (
    RESOURCES_COLUMNS,
    resources_from_row,
    rollout_from_row,
    span_from_data,
)
from agentbolt.types import Page, Resources, Rollout, Span

__all__ = [
    "POSTGRES",
    "SQLITE",
    "SqlDialect",
    "bad_cursor",
    "cursor_bigint",
    "cursor_number",
    "resources_page",
    "resources_page_query",
    "rollout_count_query",
    "rollout_page",
    "rollout_page_query",
    "span_page",
    "span_page_query",
]


def bad_cursor() -> InvalidRequestError:
    """The error for a cursor that no page of this query handed out."""
    return InvalidRequestError("invalid cursor for this query: pass back a next_cursor from the same query")


def cursor_number(value: Any) -> float:
    """A number taken from a cursor (a bool or a string is a forged cursor)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_cursor()
    return value


def cursor_bigint(value: Any) -> int:
    """An integer taken from a cursor that fits PostgreSQL's ``bigint``."""
    n = int(cursor_number(value))
    if not -(2**63) <= n < 2**63:
        raise bad_cursor()
    return n


def _sqlite_integer(value: Any) -> int:
    return int(cursor_number(value))


def _float(value: Any) -> float:
    return float(cursor_number(value))


@dataclass(frozen=True, slots=True)
class SqlDialect:
    """What the pagination SQL of one backend spells its own way."""

    param: str
    """The parameter placeholder."""
    number_param: str
    """The placeholder for a cursor number compared with a numeric sort expression."""
    nulls_in_order: bool
    """``ORDER BY`` must say where NULLs go (PostgreSQL puts them last by default)."""
    timestamp: Callable[[Any], Any]
    """Checks a cursor's ``created_at`` and makes it a parameter."""
    integer: Callable[[Any], int]
    """Checks a cursor's integer (``seq``, sequence ids, versions) and makes it a parameter."""


SQLITE = SqlDialect(param="?", number_param="?", nulls_in_order=False, timestamp=cursor_number, integer=_sqlite_integer)
POSTGRES = SqlDialect(
    param="%s", number_param="%s::float8", nulls_in_order=True, timestamp=_float, integer=cursor_bigint
)


def _page_of(rows: Sequence[Sequence[Any]], limit: int) -> tuple[Sequence[Sequence[Any]], bool]:
    """The rows of this page (``limit + 1`` were fetched) and whether a next page exists."""
    return rows[:limit], len(rows) > limit


# ---------------------------------------------------------------------------- rollouts
_SORT_EXPR = {
    "updated_at": "updated_at",
    "reward": "reward",
    "start_time": "start_time",
    "end_time": "end_time",
    "attempt_count": "attempt_count",
    "duration": "(end_time - start_time)",
}
"""Sort keys ordered by ``(expression, rollout_id)``; created_at and rollout_id are special."""
_NULLABLE = frozenset({"reward", "start_time", "end_time", "duration"})
_ROW_INDEX = {"updated_at": 9, "start_time": 10, "end_time": 11, "attempt_count": 12, "reward": 14}
"""Where a sort key's value stands in a row selected with the shared rollout columns."""


def _rollout_keyset(d: SqlDialect, sort_by: str, descending: bool, after: tuple[Any, str]) -> tuple[str, list[Any]]:
    """The WHERE term selecting rows strictly after the cursor's row."""
    value, rid = after
    op = "<" if descending else ">"
    p = d.param
    if sort_by == "created_at":
        if not isinstance(value, list) or len(value) != 2:
            raise bad_cursor()
        return f"(created_at, seq) {op} ({p}, {p})", [d.timestamp(value[0]), d.integer(value[1])]
    if sort_by == "rollout_id":
        return f"rollout_id {op} {p}", [rid]
    expr = _SORT_EXPR[sort_by]
    if sort_by not in _NULLABLE:
        return f"({expr}, rollout_id) {op} ({d.number_param}, {p})", [cursor_number(value), rid]
    if value is None:  # NULL sorts before every value (after them when descending)
        if descending:
            return f"({expr} IS NULL AND rollout_id < {p})", [rid]
        return f"({expr} IS NOT NULL OR rollout_id > {p})", [rid]
    term = f"({expr} IS NOT NULL AND ({expr}, rollout_id) {op} ({d.number_param}, {p}))"
    if descending:
        term = f"({term} OR {expr} IS NULL)"
    return term, [cursor_number(value), rid]


def _rollout_order(d: SqlDialect, sort_by: str, descending: bool) -> str:
    desc = " DESC" if descending else ""
    if sort_by == "created_at":
        return f"created_at{desc}, seq{desc}"
    if sort_by == "rollout_id":
        return f"rollout_id{desc}"
    nulls = "" if not d.nulls_in_order else " NULLS LAST" if descending else " NULLS FIRST"
    return f"{_SORT_EXPR[sort_by]}{desc}{nulls}, rollout_id{desc}"


def _rollout_cursor(sort_by: str, row: Sequence[Any]) -> str:
    rid = row[1]
    if sort_by == "created_at":
        return encode_cursor([row[8], row[0]], rid)
    if sort_by == "rollout_id":
        return encode_cursor(rid, rid)
    if sort_by == "duration":
        start, end = row[10], row[11]
        return encode_cursor(None if start is None or end is None else end - start, rid)
    return encode_cursor(row[_ROW_INDEX[sort_by]], rid)


def rollout_page_query(
    d: SqlDialect,
    columns: str,
    where: list[str],
    params: list[Any],
    *,
    sort_by: str,
    descending: bool,
    limit: int,
    after: tuple[Any, str] | None,
) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters for one page of rollouts matching the filter terms ``where``
    (``limit + 1`` rows: the extra one says whether a next page exists)."""
    where = list(where)
    params = list(params)
    if after is not None:
        term, values = _rollout_keyset(d, sort_by, descending, after)
        where.append(term)
        params.extend(values)
    sql = f"SELECT {columns} FROM rollouts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {_rollout_order(d, sort_by, descending)} LIMIT {d.param}"
    return sql, (*params, limit + 1)


def rollout_page(rows: Sequence[Sequence[Any]], limit: int, sort_by: str) -> Page[Rollout]:
    """The page of rollouts from the rows of :func:`rollout_page_query`."""
    page, more = _page_of(rows, limit)
    next_cursor = _rollout_cursor(sort_by, page[-1]) if more else None
    return Page[Rollout].model_construct(items=[rollout_from_row(r) for r in page], next_cursor=next_cursor)


def rollout_count_query(
    d: SqlDialect, where: list[str], params: list[Any], cap: int | None
) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters counting the rollouts matching ``where``, stopping at ``cap``."""
    inner = "SELECT 1 FROM rollouts" + (" WHERE " + " AND ".join(where) if where else "")
    if cap is None:
        return f"SELECT count(*) FROM ({inner}) AS m", tuple(params)
    return f"SELECT count(*) FROM ({inner} LIMIT {d.param}) AS m", (*params, cap)


# ---------------------------------------------------------------------------- spans
def span_page_query(
    d: SqlDialect,
    data_column: str,
    *,
    rollout_seq: int,
    attempt_seq: int | None,
    name: str | None,
    limit: int,
    after: tuple[Any, str] | None,
) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters for one page of a rollout's spans (of one attempt when
    ``attempt_seq`` is given), in ``(attempt, sequence_id, span_id)`` order.

    Selects ``attempt_seq, sequence_id, span_id`` and ``data_column`` (the span's JSON text).
    """
    p = d.param
    where = [f"rollout_seq = {p}"]
    params: list[Any] = [rollout_seq]
    if attempt_seq is not None:
        where.append(f"attempt_seq = {p}")
        params.append(attempt_seq)
        keyset = f"(sequence_id, span_id) > ({p}, {p})"  # one attempt: the index orders by the rest
    else:
        keyset = f"(attempt_seq, sequence_id, span_id) > ({p}, {p}, {p})"
    if name is not None:
        where.append(f"name = {p}")
        params.append(name)
    if after is not None:
        value, span_id = after
        if not isinstance(value, list) or len(value) != 2:
            raise bad_cursor()
        position = [d.integer(value[0]), d.integer(value[1]), span_id]
        where.append(keyset)
        params.extend(position if attempt_seq is None else position[1:])
    sql = (
        f"SELECT attempt_seq, sequence_id, span_id, {data_column} FROM spans WHERE {' AND '.join(where)} "
        f"ORDER BY attempt_seq, sequence_id, span_id LIMIT {p}"
    )
    return sql, (*params, limit + 1)


def span_page(rows: Sequence[Sequence[Any]], limit: int) -> Page[Span]:
    """The page of spans from the rows of :func:`span_page_query`."""
    page, more = _page_of(rows, limit)
    next_cursor = encode_cursor([page[-1][0], page[-1][1]], page[-1][2]) if more else None
    return Page[Span].model_construct(items=[span_from_data(r[3]) for r in page], next_cursor=next_cursor)


# ---------------------------------------------------------------------------- resources
def resources_page_query(d: SqlDialect, *, limit: int, after: tuple[Any, str] | None) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters for one page of resources, newest version first."""
    sql = f"SELECT {RESOURCES_COLUMNS} FROM resources"
    params: list[Any] = []
    if after is not None:
        sql += f" WHERE version < {d.param}"
        params.append(d.integer(after[0]))
    return sql + f" ORDER BY version DESC LIMIT {d.param}", (*params, limit + 1)


def resources_page(rows: Sequence[Sequence[Any]], limit: int) -> Page[Resources]:
    """The page of resources from the rows of :func:`resources_page_query`."""
    page, more = _page_of(rows, limit)
    nxt = encode_cursor(page[-1][0], str(page[-1][0])) if more else None
    return Page[Resources].model_construct(items=[resources_from_row(r) for r in page], next_cursor=nxt)
