"""The read queries of :class:`~agentbolt.store.sqlite.SqliteStore`.

Each function runs on a reader thread inside one read transaction, so a page or a stats
snapshot is consistent even while the writer commits. Ordering and cursors follow
:class:`MemoryStore`: keyset pagination on indexed columns, ``None`` before any value,
ties broken by enqueue order (``created_at``) or by id; the SQL for pages is shared with
PostgreSQL in :mod:`agentbolt.store.sql_pagination`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store.errors import NotFoundError
from agentbolt.store.sql_like import like_pattern
from agentbolt.store.sql_pagination import (
    SQLITE,
    resources_page,
    resources_page_query,
    rollout_count_query,
    rollout_page,
    rollout_page_query,
    span_page,
    span_page_query,
)
from agentbolt.store.sqlite_rows import (
    ATTEMPT_COLUMNS,
    RESOURCES_COLUMNS,
    ROLLOUT_COLUMNS,
    WORKER_COLUMNS,
    attempt_from_row,
    resources_from_row,
    rollout_from_row,
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


# ---------------------------------------------------------------------------- rollouts
def get_rollout(conn: sqlite3.Connection, rollout_id: str) -> Rollout:
    row = conn.execute(f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE rollout_id = ?", (rollout_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return rollout_from_row(row)


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
        pattern = like_pattern(needle)
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
    sql, values = rollout_page_query(
        SQLITE, ROLLOUT_COLUMNS, where, params, sort_by=sort_by, descending=descending, limit=limit, after=after
    )
    return rollout_page(conn.execute(sql, values).fetchall(), limit, sort_by)


def count_rollouts(
    conn: sqlite3.Connection, *, status: Sequence[str] | None, mode: str | None, needle: str | None, cap: int | None
) -> int:
    where, params = _filters(status, mode, None, needle)
    (n,) = conn.execute(*rollout_count_query(SQLITE, where, params, cap)).fetchone()
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
    attempt_seq = None
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
        attempt_seq = att[1]
    sql, params = span_page_query(
        SQLITE, "data", rollout_seq=seq, attempt_seq=attempt_seq, name=name, limit=limit, after=after
    )
    return span_page(conn.execute(sql, params).fetchall(), limit)


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
    rows = conn.execute(*resources_page_query(SQLITE, limit=limit, after=after)).fetchall()
    return resources_page(rows, limit)


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
