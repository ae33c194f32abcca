"""The read queries of :class:`~agentbolt.store.sqlite.SqliteStore`.

Each function runs on a reader thread inside one read transaction, so a page or a stats
snapshot is consistent even while the writer commits. Ordering and cursors follow
:class:`MemoryStore`: keyset pagination on indexed columns, ``None`` before any value,
ties broken by enqueue order (``created_at``) or by id.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store.errors import InvalidRequestError, NotFoundError
from agentbolt.store.pagination import encode_cursor
from agentbolt.store.sqlite_rows import (
    ATTEMPT_COLUMNS,
    RESOURCES_COLUMNS,
    ROLLOUT_COLUMNS,
    WORKER_COLUMNS,
    attempt_from_row,
    resources_from_row,
    rollout_from_row,
    span_from_data,
    worker_from_row,
)
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Page,
    Resources,
    Rollout,
    RolloutStatus,
    Span,
    StoreStats,
    Worker,
)

__all__ = [
    "get_rollout",
    "query_rollouts",
    "count_rollouts",
    "get_latest_attempts",
    "get_attempt",
    "query_attempts",
    "query_spans",
    "get_resources",
    "get_latest_resources",
    "query_resources",
    "get_worker",
    "query_workers",
    "stats",
]


def _bad_cursor() -> InvalidRequestError:
    return InvalidRequestError("invalid cursor for this query: pass back a next_cursor from the same query")


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad_cursor()
    return value


# ---------------------------------------------------------------------------- rollouts
def get_rollout(conn: sqlite3.Connection, rollout_id: str) -> Rollout:
    row = conn.execute(f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE rollout_id = ?", (rollout_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return rollout_from_row(row)


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


def _keyset(sort_by: str, descending: bool, after: tuple[Any, str]) -> tuple[str, list[Any]]:
    """The WHERE term selecting rows strictly after the cursor's row."""
    value, rid = after
    op = "<" if descending else ">"
    if sort_by == "created_at":
        if not isinstance(value, list) or len(value) != 2:
            raise _bad_cursor()
        return f"(created_at, seq) {op} (?, ?)", [_number(value[0]), int(_number(value[1]))]
    if sort_by == "rollout_id":
        return f"rollout_id {op} ?", [rid]
    expr = _SORT_EXPR[sort_by]
    if sort_by not in _NULLABLE:
        return f"({expr}, rollout_id) {op} (?, ?)", [_number(value), rid]
    # NULL sorts before every value (after them when descending)
    if value is None:
        if descending:
            return f"({expr} IS NULL AND rollout_id < ?)", [rid]
        return f"({expr} IS NOT NULL OR rollout_id > ?)", [rid]
    term = f"({expr} IS NOT NULL AND ({expr}, rollout_id) {op} (?, ?))"
    if descending:
        term = f"({term} OR {expr} IS NULL)"
    return term, [_number(value), rid]


def _order(sort_by: str) -> tuple[str, ...]:
    if sort_by == "created_at":
        return ("created_at", "seq")
    if sort_by == "rollout_id":
        return ("rollout_id",)
    return (_SORT_EXPR[sort_by], "rollout_id")


def _cursor_for(sort_by: str, row: tuple[Any, ...]) -> str:
    rid = row[1]
    if sort_by == "created_at":
        return encode_cursor([row[8], row[0]], rid)
    if sort_by == "rollout_id":
        return encode_cursor(rid, rid)
    if sort_by == "duration":
        start, end = row[10], row[11]
        return encode_cursor(None if start is None or end is None else end - start, rid)
    return encode_cursor(row[_ROW_INDEX[sort_by]], rid)


def _filters(
    status: Sequence[str] | None, mode: str | None, rollout_ids: Sequence[str] | None, needle: str | None
) -> tuple[list[str], list[Any]]:
    """WHERE terms and their parameters for the rollout filters."""
    where: list[str] = []
    params: list[Any] = []
    if status:
        values = sorted(set(status))
        where.append(f"status IN ({', '.join('?' * len(values))})")
        params.extend(values)
    if mode is not None:
        where.append("mode = ?")
        params.append(mode)
    if rollout_ids is not None:
        where.append("rollout_id IN (SELECT value FROM json_each(?))")
        params.append(orjson.dumps(list(rollout_ids)).decode())
    if needle is not None:
        # LIKE ignores ASCII case only, like agentbolt.store.search.fold (and is ~3x
        # faster than instr(lower(...))); % and _ in the needle are matched literally
        pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append("(rollout_id LIKE ? ESCAPE '\\' OR input LIKE ? ESCAPE '\\')")
        params.extend([pattern, pattern])
    return where, params


def query_rollouts(
    conn: sqlite3.Connection,
    *,
    status: Sequence[str] | None,
    mode: str | None,
    rollout_ids: Sequence[str] | None,
    needle: str | None = None,
    sort_by: str,
    descending: bool,
    limit: int,
    after: tuple[Any, str] | None,
) -> Page[Rollout]:
    where, params = _filters(status, mode, rollout_ids, needle)
    if after is not None:
        term, values = _keyset(sort_by, descending, after)
        where.append(term)
        params.extend(values)
    direction = " DESC" if descending else ""
    order = ", ".join(col + direction for col in _order(sort_by))
    sql = f"SELECT {ROLLOUT_COLUMNS} FROM rollouts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {order} LIMIT ?"
    rows = conn.execute(sql, (*params, limit + 1)).fetchall()
    page = rows[:limit]
    next_cursor = _cursor_for(sort_by, page[-1]) if len(rows) > limit else None
    return Page[Rollout].model_construct(items=[rollout_from_row(r) for r in page], next_cursor=next_cursor)


def count_rollouts(
    conn: sqlite3.Connection, *, status: Sequence[str] | None, mode: str | None, needle: str | None, cap: int | None
) -> int:
    where, params = _filters(status, mode, None, needle)
    inner = "SELECT 1 FROM rollouts" + (" WHERE " + " AND ".join(where) if where else "")
    if cap is None:
        (n,) = conn.execute(f"SELECT count(*) FROM ({inner})", params).fetchone()
    else:
        (n,) = conn.execute(f"SELECT count(*) FROM ({inner} LIMIT ?)", (*params, cap)).fetchone()
    return int(n)


def get_latest_attempts(conn: sqlite3.Connection, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
    rows = conn.execute(
        f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE attempt_id IN "
        "(SELECT latest_attempt_id FROM rollouts WHERE rollout_id IN (SELECT value FROM json_each(?)))",
        (orjson.dumps(list(rollout_ids)).decode(),),
    ).fetchall()
    attempts = [attempt_from_row(r) for r in rows]
    return {a.rollout_id: a for a in attempts}


# ---------------------------------------------------------------------------- attempts
def get_attempt(conn: sqlite3.Connection, rollout_id: str, attempt_id: str) -> Attempt:
    row = conn.execute(f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE attempt_id = ?", (attempt_id,)).fetchone()
    if row is None or row[2] != rollout_id:
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
    return attempt_from_row(row)


def _rollout_key(conn: sqlite3.Connection, rollout_id: str) -> tuple[int, str | None]:
    """The rollout's ``seq`` and latest attempt id, or :class:`NotFoundError`."""
    row = conn.execute("SELECT seq, latest_attempt_id FROM rollouts WHERE rollout_id = ?", (rollout_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return row[0], row[1]


def query_attempts(conn: sqlite3.Connection, rollout_id: str) -> list[Attempt]:
    seq, _ = _rollout_key(conn, rollout_id)
    rows = conn.execute(f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE rollout_seq = ? ORDER BY sequence_id", (seq,))
    return [attempt_from_row(r) for r in rows]


# ---------------------------------------------------------------------------- spans
def query_spans(
    conn: sqlite3.Connection,
    rollout_id: str,
    attempt_id: str | None,
    *,
    name: str | None,
    limit: int,
    after: tuple[Any, str] | None,
) -> Page[Span]:
    seq, latest = _rollout_key(conn, rollout_id)
    where = ["rollout_seq = ?"]
    params: list[Any] = [seq]
    if attempt_id is not None:
        if attempt_id == "latest":
            attempt_id = latest
            if attempt_id is None:
                return Page[Span].model_construct(items=[], next_cursor=None)
        att = conn.execute(
            "SELECT rollout_id, sequence_id FROM attempts WHERE attempt_id = ?", (attempt_id,)
        ).fetchone()
        if att is None or att[0] != rollout_id:
            raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
        where.append("attempt_seq = ?")
        params.append(att[1])
        keyset = "(sequence_id, span_id) > (?, ?)"  # one attempt: the index orders by the rest
    else:
        keyset = "(attempt_seq, sequence_id, span_id) > (?, ?, ?)"
    if name is not None:
        where.append("name = ?")
        params.append(name)
    if after is not None:
        value, span_id = after
        if not isinstance(value, list) or len(value) != 2:
            raise _bad_cursor()
        where.append(keyset)
        position = [int(_number(value[0])), int(_number(value[1])), span_id]
        params.extend(position if attempt_id is None else position[1:])
    rows = conn.execute(
        f"SELECT attempt_seq, sequence_id, span_id, data FROM spans WHERE {' AND '.join(where)} "
        "ORDER BY attempt_seq, sequence_id, span_id LIMIT ?",
        (*params, limit + 1),
    ).fetchall()
    page = rows[:limit]
    next_cursor = encode_cursor([page[-1][0], page[-1][1]], page[-1][2]) if len(rows) > limit else None
    return Page[Span].model_construct(items=[span_from_data(r[3]) for r in page], next_cursor=next_cursor)


# ---------------------------------------------------------------------------- resources
def get_resources(conn: sqlite3.Connection, version: int) -> Resources:
    row = conn.execute(f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE version = ?", (version,)).fetchone()
    if row is None:
        raise NotFoundError(f"resources version {version} not found")
    return resources_from_row(row)


def get_latest_resources(conn: sqlite3.Connection) -> Resources | None:
    row = conn.execute(f"SELECT {RESOURCES_COLUMNS} FROM resources ORDER BY version DESC LIMIT 1").fetchone()
    return None if row is None else resources_from_row(row)


def query_resources(conn: sqlite3.Connection, *, limit: int, after: tuple[Any, str] | None) -> Page[Resources]:
    sql = f"SELECT {RESOURCES_COLUMNS} FROM resources"
    params: list[Any] = []
    if after is not None:
        sql += " WHERE version < ?"
        params.append(int(_number(after[0])))
    rows = conn.execute(sql + " ORDER BY version DESC LIMIT ?", (*params, limit + 1)).fetchall()
    page = rows[:limit]
    nxt = encode_cursor(page[-1][0], str(page[-1][0])) if len(rows) > limit else None
    return Page[Resources].model_construct(items=[resources_from_row(r) for r in page], next_cursor=nxt)


# ---------------------------------------------------------------------------- workers & stats
def get_worker(conn: sqlite3.Connection, worker_id: str) -> Worker:
    row = conn.execute(f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = ?", (worker_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"worker {worker_id!r} not found")
    return worker_from_row(row)


def query_workers(conn: sqlite3.Connection) -> list[Worker]:
    return [worker_from_row(r) for r in conn.execute(f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY worker_id")]


def stats(conn: sqlite3.Connection) -> StoreStats:
    by_status = {s.value: 0 for s in RolloutStatus}
    by_status.update(conn.execute("SELECT status, count(*) FROM rollouts GROUP BY status").fetchall())
    att_status = {s.value: 0 for s in AttemptStatus}
    att_status.update(conn.execute("SELECT status, count(*) FROM attempts GROUP BY status").fetchall())
    (spans,) = conn.execute("SELECT count(*) FROM spans").fetchone()
    (workers,) = conn.execute("SELECT count(*) FROM workers").fetchone()
    (latest,) = conn.execute("SELECT max(version) FROM resources").fetchone()
    return StoreStats(
        rollouts_by_status=by_status,
        attempts_by_status=att_status,
        queue_depth=by_status["queuing"] + by_status["requeuing"],
        total_rollouts=sum(by_status.values()),
        total_attempts=sum(att_status.values()),
        total_spans=spans,
        total_workers=workers,
        latest_resources_version=latest,
    )
