"""PostgreSQL's side of the reads of :class:`~agentbolt.store.postgres.PostgresStore`.

The reads themselves are the plans of :mod:`agentbolt.store.sql.reads`; this module runs
them (:func:`run_plan`, in one transaction: a consistent snapshot per statement) and names
PostgreSQL's spelling (:data:`DIALECT`): ``%s`` placeholders, ``NULLS FIRST`` in the page
order (its default puts NULLs last), lists of ids as arrays, attempts keyed by
``claim_order``, spans whose JSON holds a NUL kept as text, stats in one statement.

Search: the needle is matched with ``LIKE`` against the ASCII-folded id and input text
(exactly :mod:`agentbolt.store.search`'s rules). When pg_trgm is installed a trigram
index on ``fold(id || newline || input)`` answers a superset first; the exact condition
then filters it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson

from agentbolt.store.postgres.engine import PgTx
from agentbolt.store.postgres.rows import attempt_columns
from agentbolt.store.postgres.schema import FOLD, SEARCH_TEXT
from agentbolt.store.sql.like import like_pattern
from agentbolt.store.sql.pagination import POSTGRES
from agentbolt.store.sql.reads import Plan, Query, ReadDialect, store_stats
from agentbolt.types import StoreStats

__all__ = ["DIALECT", "run_plan"]

T = TypeVar("T")
Conn = Any  # psycopg.AsyncConnection


async def run_plan(conn: Conn, tx: PgTx, make_plan: Callable[[], Plan[T]]) -> T:
    """Run a new read plan on ``conn``: each query it yields, then its answer."""
    plan = make_plan()
    try:
        query = next(plan)
        while True:
            cur = await conn.execute(query.sql, query.params)
            query = plan.send(await (cur.fetchall() if query.all_rows else cur.fetchone()))
    except StopIteration as done:
        return done.value


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


def _latest_attempts(rollout_ids: list[str]) -> Query:
    return Query(
        f"SELECT {attempt_columns('a.')} FROM rollouts r JOIN attempts a ON a.attempt_id = r.latest_attempt_id "
        "WHERE r.rollout_id = ANY(%s)",
        (rollout_ids,),
        all_rows=True,
    )


def _stats() -> Plan[StoreStats]:
    # one statement: one snapshot, one round trip
    row = yield Query(
        "SELECT (SELECT coalesce(json_object_agg(status, n), '{}') FROM "
        "(SELECT status, count(*) AS n FROM rollouts GROUP BY status) AS r)::text, "
        "(SELECT coalesce(json_object_agg(status, n), '{}') FROM "
        "(SELECT status, count(*) AS n FROM attempts GROUP BY status) AS a)::text, "
        "(SELECT count(*) FROM spans), (SELECT count(*) FROM workers), (SELECT max(version) FROM resources)",
    )
    return store_stats(orjson.loads(row[0]), orjson.loads(row[1]), row[2], row[3], row[4])


DIALECT = ReadDialect(
    pages=POSTGRES,
    attempt_columns=attempt_columns(),
    span_data="coalesce(data::text, raw)",
    metric_data="data::text",
    filters=_filters,
    latest_attempts=_latest_attempts,
    stats=_stats,
    version_fits=lambda version: -(2**31) <= version < 2**31,  # resources.version is an integer
)
