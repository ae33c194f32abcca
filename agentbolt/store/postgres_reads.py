"""The read queries of :class:`~agentbolt.store.postgres.PostgresStore`.

Each runs in one transaction (a consistent snapshot per statement). Ordering and cursors
follow :class:`~agentbolt.store.memory.MemoryStore`: keyset pagination, ``None`` before
every value (PostgreSQL's default puts NULLs last, so the order says ``NULLS FIRST``),
ties broken by enqueue order (``created_at``) or by id; the SQL for pages is shared with
SQLite in :mod:`agentbolt.store.sql_pagination`.

Search: the needle is matched with ``LIKE`` against the ASCII-folded id and input text
(exactly :mod:`agentbolt.store.search`'s rules). When pg_trgm is installed a trigram
index on ``fold(id || newline || input)`` answers a superset first; the exact condition
then filters it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store.errors import NotFoundError
from agentbolt.store.postgres_engine import PgTx
from agentbolt.store.postgres_rows import attempt_columns, fetchall, fetchone, rollout_columns
from agentbolt.store.postgres_schema import FOLD, SEARCH_TEXT
from agentbolt.store.sql_like import like_pattern
from agentbolt.store.sql_pagination import (
    POSTGRES,
    resources_page,
    resources_page_query,
    rollout_count_query,
    rollout_page,
    rollout_page_query,
    span_page,
    span_page_query,
)
from agentbolt.store.sql_rows import (
    RESOURCES_COLUMNS,
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

Conn = Any  # psycopg.AsyncConnection


# ---------------------------------------------------------------------------- rollouts
async def get_rollout(conn: Conn, tx: PgTx, rollout_id: str) -> Rollout:
    row = await fetchone(conn, f"SELECT {rollout_columns()} FROM rollouts WHERE rollout_id = %s", (rollout_id,))
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
        where.append("status = ANY(%s)")
        params.append(sorted(set(status)))
    if mode is not None:
        where.append("mode = %s")
        params.append(mode)
    if rollout_ids is not None:
        where.append("rollout_id = ANY(%s)")
        params.append(list(rollout_ids))
    if needle is not None:
        pattern = like_pattern(needle)
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
    sql, values = rollout_page_query(
        POSTGRES, rollout_columns(), where, params, sort_by=sort_by, descending=descending, limit=limit, after=after
    )
    return rollout_page(await fetchall(conn, sql, values), limit, sort_by)


async def count_rollouts(
    conn: Conn, tx: PgTx, *, status: Sequence[str] | None, mode: str | None, needle: str | None, cap: int | None
) -> int:
    where, params = _filters(status, mode, None, needle)
    row = await fetchone(conn, *rollout_count_query(POSTGRES, where, params, cap))
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
    attempt_seq = None
    if attempt_id is not None:
        if attempt_id == "latest":
            attempt_id = latest
            if attempt_id is None:
                return Page[Span].model_construct(items=[], next_cursor=None)
        att = await fetchone(conn, "SELECT rollout_id, sequence_id FROM attempts WHERE attempt_id = %s", (attempt_id,))
        if att is None or att[0] != rollout_id:
            raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
        attempt_seq = att[1]
    sql, params = span_page_query(
        POSTGRES,
        "coalesce(data::text, raw)",
        rollout_seq=seq,
        attempt_seq=attempt_seq,
        name=name,
        limit=limit,
        after=after,
    )
    return span_page(await fetchall(conn, sql, params), limit)


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
    rows = await fetchall(conn, *resources_page_query(POSTGRES, limit=limit, after=after))
    return resources_page(rows, limit)


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
