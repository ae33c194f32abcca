"""The read queries of :class:`~agentbolt.store.postgres.PostgresStore`.

Each runs in one transaction (a consistent snapshot per statement). Ordering and cursors
follow :class:`~agentbolt.store.memory.MemoryStore`: keyset pagination, ``None`` before
every value (PostgreSQL's default puts NULLs last, so the order says ``NULLS FIRST``),
ties broken by enqueue order (``created_at``) or by id.

Search: the needle is matched with ``LIKE`` against the ASCII-folded id and input text
(exactly :mod:`agentbolt.store.search`'s rules). When pg_trgm is installed a trigram
index on ``fold(id || newline || input)`` answers a superset first; the exact condition
then filters it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store.errors import InvalidRequestError, NotFoundError
from agentbolt.store.pagination import encode_cursor
from agentbolt.store.postgres_engine import PgTx
from agentbolt.store.postgres_rows import attempt_columns, fetchall, fetchone, rollout_columns
from agentbolt.store.postgres_schema import FOLD, SEARCH_TEXT
from agentbolt.store.sqlite_rows import (
    RESOURCES_COLUMNS,
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
    "count_rollouts",
    "get_attempt",
    "get_latest_attempts",
    "get_latest_resources",
    "get_resources",
    "get_rollout",
    "get_worker",
    "query_attempts",
    "query_resources",
    "query_rollouts",
    "query_spans",
    "query_workers",
    "stats",
]

Conn = Any  # psycopg.AsyncConnection


def _bad_cursor() -> InvalidRequestError:
    return InvalidRequestError("invalid cursor for this query: pass back a next_cursor from the same query")


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad_cursor()
    return value


def _bigint(value: Any) -> int:
    n = int(_number(value))
    if not -(2**63) <= n < 2**63:
        raise _bad_cursor()
    return n


# ---------------------------------------------------------------------------- rollouts
async def get_rollout(conn: Conn, tx: PgTx, rollout_id: str) -> Rollout:
    row = await fetchone(conn, f"SELECT {rollout_columns()} FROM rollouts WHERE rollout_id = %s", (rollout_id,))
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
        return f"(created_at, seq) {op} (%s, %s)", [float(_number(value[0])), _bigint(value[1])]
    if sort_by == "rollout_id":
        return f"rollout_id {op} %s", [rid]
    expr = _SORT_EXPR[sort_by]
    if sort_by not in _NULLABLE:
        return f"({expr}, rollout_id) {op} (%s::float8, %s)", [_number(value), rid]
    if value is None:  # NULL sorts before every value (after them when descending)
        if descending:
            return f"({expr} IS NULL AND rollout_id < %s)", [rid]
        return f"({expr} IS NOT NULL OR rollout_id > %s)", [rid]
    term = f"({expr} IS NOT NULL AND ({expr}, rollout_id) {op} (%s::float8, %s))"
    if descending:
        term = f"({term} OR {expr} IS NULL)"
    return term, [_number(value), rid]


def _order(sort_by: str, descending: bool) -> str:
    d = " DESC" if descending else ""
    if sort_by == "created_at":
        return f"created_at{d}, seq{d}"
    if sort_by == "rollout_id":
        return f"rollout_id{d}"
    nulls = " NULLS LAST" if descending else " NULLS FIRST"
    return f"{_SORT_EXPR[sort_by]}{d}{nulls}, rollout_id{d}"


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


def _like_pattern(needle: str) -> str:
    return "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _filters(
    status: Sequence[str] | None, mode: str | None, rollout_ids: Sequence[str] | None, needle: str | None
) -> tuple[list[str], list[Any]]:
    """WHERE terms and their parameters for the rollout filters."""
    where: list[str] = []
    params: list[Any] = []
    if status:
        where.append("status = ANY(%s)")
        params.append(sorted(set(status)))
    if mode is not None:
        where.append("mode = %s")
        params.append(mode)
    if rollout_ids is not None:
        where.append("rollout_id = ANY(%s)")
        params.append(list(rollout_ids))
    if needle is not None:
        pattern = _like_pattern(needle)
        # the first term is what the trigram index answers (a superset); the second decides
        where.append(
            f"{SEARCH_TEXT} LIKE %s AND ({FOLD.format('rollout_id')} LIKE %s OR {FOLD.format('input')} LIKE %s)"
        )
        params.extend([pattern, pattern, pattern])
    return where, params


async def query_rollouts(
    conn: Conn,
    tx: PgTx,
    *,
    status: Sequence[str] | None,
    mode: str | None,
    rollout_ids: Sequence[str] | None,
    needle: str | None,
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
    sql = f"SELECT {rollout_columns()} FROM rollouts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {_order(sort_by, descending)} LIMIT %s"
    rows = await fetchall(conn, sql, (*params, limit + 1))
    page = rows[:limit]
    next_cursor = _cursor_for(sort_by, page[-1]) if len(rows) > limit else None
    return Page[Rollout].model_construct(items=[rollout_from_row(r) for r in page], next_cursor=next_cursor)


async def count_rollouts(
    conn: Conn, tx: PgTx, *, status: Sequence[str] | None, mode: str | None, needle: str | None, cap: int | None
) -> int:
    where, params = _filters(status, mode, None, needle)
    inner = "SELECT 1 FROM rollouts" + (" WHERE " + " AND ".join(where) if where else "")
    if cap is None:
        row = await fetchone(conn, f"SELECT count(*) FROM ({inner}) AS m", params)
    else:
        row = await fetchone(conn, f"SELECT count(*) FROM ({inner} LIMIT %s) AS m", (*params, cap))
    assert row is not None
    return int(row[0])


async def get_latest_attempts(conn: Conn, tx: PgTx, rollout_ids: Sequence[str]) -> dict[str, Attempt]:
    rows = await fetchall(
        conn,
        f"SELECT {attempt_columns('a.')} FROM rollouts r JOIN attempts a ON a.attempt_id = r.latest_attempt_id "
        "WHERE r.rollout_id = ANY(%s)",
        (list(rollout_ids),),
    )
    attempts = [attempt_from_row(r) for r in rows]
    return {a.rollout_id: a for a in attempts}


# ---------------------------------------------------------------------------- attempts
async def get_attempt(conn: Conn, tx: PgTx, rollout_id: str, attempt_id: str) -> Attempt:
    row = await fetchone(conn, f"SELECT {attempt_columns()} FROM attempts WHERE attempt_id = %s", (attempt_id,))
    if row is None or row[2] != rollout_id:
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
    return attempt_from_row(row)


async def _rollout_key(conn: Conn, rollout_id: str) -> tuple[int, str | None]:
    """The rollout's ``seq`` and latest attempt id, or :class:`NotFoundError`."""
    row = await fetchone(conn, "SELECT seq, latest_attempt_id FROM rollouts WHERE rollout_id = %s", (rollout_id,))
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return row[0], row[1]


async def query_attempts(conn: Conn, tx: PgTx, rollout_id: str) -> list[Attempt]:
    seq, _ = await _rollout_key(conn, rollout_id)
    rows = await fetchall(
        conn, f"SELECT {attempt_columns()} FROM attempts WHERE rollout_seq = %s ORDER BY sequence_id", (seq,)
    )
    return [attempt_from_row(r) for r in rows]


# ---------------------------------------------------------------------------- spans
async def query_spans(
    conn: Conn,
    tx: PgTx,
    rollout_id: str,
    attempt_id: str | None,
    *,
    name: str | None,
    limit: int,
    after: tuple[Any, str] | None,
) -> Page[Span]:
    seq, latest = await _rollout_key(conn, rollout_id)
    where = ["rollout_seq = %s"]
    params: list[Any] = [seq]
    if attempt_id is not None:
        if attempt_id == "latest":
            attempt_id = latest
            if attempt_id is None:
                return Page[Span].model_construct(items=[], next_cursor=None)
        att = await fetchone(conn, "SELECT rollout_id, sequence_id FROM attempts WHERE attempt_id = %s", (attempt_id,))
        if att is None or att[0] != rollout_id:
            raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
        where.append("attempt_seq = %s")
        params.append(att[1])
        keyset = "(sequence_id, span_id) > (%s, %s)"  # one attempt: the index orders by the rest
    else:
        keyset = "(attempt_seq, sequence_id, span_id) > (%s, %s, %s)"
    if name is not None:
        where.append("name = %s")
        params.append(name)
    if after is not None:
        value, span_id = after
        if not isinstance(value, list) or len(value) != 2:
            raise _bad_cursor()
        position = [_bigint(value[0]), _bigint(value[1]), span_id]
        where.append(keyset)
        params.extend(position if attempt_id is None else position[1:])
    rows = await fetchall(
        conn,
        f"SELECT attempt_seq, sequence_id, span_id, coalesce(data::text, raw) FROM spans "
        f"WHERE {' AND '.join(where)} ORDER BY attempt_seq, sequence_id, span_id LIMIT %s",
        (*params, limit + 1),
    )
    page = rows[:limit]
    next_cursor = encode_cursor([page[-1][0], page[-1][1]], page[-1][2]) if len(rows) > limit else None
    return Page[Span].model_construct(items=[span_from_data(r[3]) for r in page], next_cursor=next_cursor)


# ---------------------------------------------------------------------------- resources
async def get_resources(conn: Conn, tx: PgTx, version: int) -> Resources:
    if not -(2**31) <= version < 2**31:
        raise NotFoundError(f"resources version {version} not found")
    row = await fetchone(conn, f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE version = %s", (version,))
    if row is None:
        raise NotFoundError(f"resources version {version} not found")
    return resources_from_row(row)


async def get_latest_resources(conn: Conn, tx: PgTx) -> Resources | None:
    row = await fetchone(conn, f"SELECT {RESOURCES_COLUMNS} FROM resources ORDER BY version DESC LIMIT 1")
    return None if row is None else resources_from_row(row)


async def query_resources(conn: Conn, tx: PgTx, *, limit: int, after: tuple[Any, str] | None) -> Page[Resources]:
    sql = f"SELECT {RESOURCES_COLUMNS} FROM resources"
    params: list[Any] = []
    if after is not None:
        sql += " WHERE version < %s"
        params.append(_bigint(after[0]))
    rows = await fetchall(conn, sql + " ORDER BY version DESC LIMIT %s", (*params, limit + 1))
    page = rows[:limit]
    nxt = encode_cursor(page[-1][0], str(page[-1][0])) if len(rows) > limit else None
    return Page[Resources].model_construct(items=[resources_from_row(r) for r in page], next_cursor=nxt)


# ---------------------------------------------------------------------------- workers & stats
async def get_worker(conn: Conn, tx: PgTx, worker_id: str) -> Worker:
    row = await fetchone(conn, f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = %s", (worker_id,))
    if row is None:
        raise NotFoundError(f"worker {worker_id!r} not found")
    return worker_from_row(row)


async def query_workers(conn: Conn, tx: PgTx) -> list[Worker]:
    rows = await fetchall(conn, f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY worker_id")
    return [worker_from_row(r) for r in rows]


async def stats(conn: Conn, tx: PgTx) -> StoreStats:
    # one statement: one snapshot, one round trip
    row = await fetchone(
        conn,
        "SELECT (SELECT coalesce(json_object_agg(status, n), '{}') FROM "
        "(SELECT status, count(*) AS n FROM rollouts GROUP BY status) AS r)::text, "
        "(SELECT coalesce(json_object_agg(status, n), '{}') FROM "
        "(SELECT status, count(*) AS n FROM attempts GROUP BY status) AS a)::text, "
        "(SELECT count(*) FROM spans), (SELECT count(*) FROM workers), (SELECT max(version) FROM resources)",
    )
    assert row is not None
    by_status = {s.value: 0 for s in RolloutStatus}
    by_status.update(orjson.loads(row[0]))
    att_status = {s.value: 0 for s in AttemptStatus}
    att_status.update(orjson.loads(row[1]))
    return StoreStats(
        rollouts_by_status=by_status,
        attempts_by_status=att_status,
        queue_depth=by_status["queuing"] + by_status["requeuing"],
        total_rollouts=sum(by_status.values()),
        total_attempts=sum(att_status.values()),
        total_spans=row[2],
        total_workers=row[3],
        latest_resources_version=row[4],
    )
