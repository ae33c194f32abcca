"""SQLite's side of the reads of :class:`~agentbolt.store.sqlite.SqliteStore`.

The reads themselves are the plans of :mod:`agentbolt.store.sql.reads`; this module runs
them (:func:`run_plan`, on a reader thread inside one read transaction, so a page or a
stats snapshot is consistent even while the writer commits) and names SQLite's spelling
(:data:`DIALECT`): ``?`` placeholders, lists of ids as JSON through ``json_each``,
search with ``LIKE``, attempts keyed by ``rowid``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson

from agentbolt.store.sql.like import like_pattern
from agentbolt.store.sql.pagination import SQLITE
from agentbolt.store.sql.reads import Plan, Query, ReadDialect, store_stats
from agentbolt.store.sqlite.rows import ATTEMPT_COLUMNS
from agentbolt.types import StoreStats

__all__ = ["DIALECT", "run_plan"]

T = TypeVar("T")


def run_plan(conn: sqlite3.Connection, make_plan: Callable[[], Plan[T]]) -> T:
    """Run a new read plan on ``conn``: each query it yields, then its answer."""
    plan = make_plan()
    try:
        query = next(plan)
        while True:
            cur = conn.execute(query.sql, query.params)
            query = plan.send(cur.fetchall() if query.all_rows else cur.fetchone())
    except StopIteration as done:
        return done.value


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


def _latest_attempts(rollout_ids: list[str]) -> Query:
    return Query(
        f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE attempt_id IN "
        "(SELECT latest_attempt_id FROM rollouts WHERE rollout_id IN (SELECT value FROM json_each(?)))",
        (orjson.dumps(rollout_ids).decode(),),
        all_rows=True,
    )


def _stats() -> Plan[StoreStats]:
    rollouts = yield Query("SELECT status, count(*) FROM rollouts GROUP BY status", all_rows=True)
    attempts = yield Query("SELECT status, count(*) FROM attempts GROUP BY status", all_rows=True)
    (spans,) = yield Query("SELECT count(*) FROM spans")
    (workers,) = yield Query("SELECT count(*) FROM workers")
    (latest,) = yield Query("SELECT max(version) FROM resources")
    return store_stats(dict(rollouts), dict(attempts), spans, workers, latest)


DIALECT = ReadDialect(
    pages=SQLITE,
    attempt_columns=ATTEMPT_COLUMNS,
    span_data="data",
    metric_data="data",
    filters=_filters,
    latest_attempts=_latest_attempts,
    stats=_stats,
)
