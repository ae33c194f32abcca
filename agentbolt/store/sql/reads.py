"""The read queries of both SQL backends, written once as plans.

A plan is a generator: it yields each :class:`Query` it needs, receives that query's rows
(all of them, or the first one or ``None``), and returns the answer. It does no I/O
itself, so the same plan runs on SQLite's blocking connections and on psycopg's async
ones: each backend's ``reads`` module has a ``run_plan`` that executes the queries (in one
read transaction) and a :class:`ReadDialect` naming what its SQL spells its own way.

Ordering and cursors follow :class:`~agentbolt.store.memory.MemoryStore`: keyset
pagination on indexed columns, ``None`` before any value, ties broken by enqueue order
(``created_at``) or by id (the page SQL is :mod:`agentbolt.store.sql.pagination`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from agentbolt.store.errors import NotFoundError
from agentbolt.store.sql.pagination import (
    SqlDialect,
    resources_page,
    resources_page_query,
    rollout_count_query,
    rollout_page,
    rollout_page_query,
    span_page,
    span_page_query,
)
from agentbolt.store.sql.rows import (
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
    MetricRecord,
    Page,
    Resources,
    Rollout,
    RolloutStatus,
    Span,
    StoreStats,
    Worker,
)

__all__ = [
    "Plan",
    "Query",
    "ReadDialect",
    "count_rollouts",
    "get_attempt",
    "get_latest_attempts",
    "get_latest_resources",
    "get_resources",
    "get_rollout",
    "get_worker",
    "metric_runs",
    "query_attempts",
    "query_metrics",
    "query_resources",
    "query_rollouts",
    "query_spans",
    "query_workers",
    "stats",
    "store_stats",
]

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class Query:
    """One statement of a plan; ``all_rows`` asks for every row, else the first (or None)."""

    sql: str
    params: Sequence[Any] = ()
    all_rows: bool = False


Plan = Generator[Query, Any, T]
"""A read: yields queries, receives their rows, returns the answer."""

Filters = Callable[
    [Sequence[str] | None, str | None, Sequence[str] | None, str | None], tuple[list[str], list[Any]]
]


@dataclass(frozen=True, slots=True)
class ReadDialect:
    """What one backend's reads spell its own way."""

    pages: SqlDialect
    """Placeholders, casts and cursor checks of the page queries."""
    attempt_columns: str
    """The columns :func:`attempt_from_row` reads (the first is the attempt's row key)."""
    span_data: str
    """The expression of a span's JSON text."""
    metric_data: str
    """The expression of a metric record's JSON text."""
    filters: Filters
    """``WHERE`` terms and parameters for rollout filters: status, mode, ids, search needle."""
    latest_attempts: Callable[[list[str]], Query]
    """The query of the latest attempts (rows as :func:`attempt_from_row` reads) of rollouts."""
    stats: Callable[[], Plan[StoreStats]]
    """The plan of :meth:`~agentbolt.store.base.Store.stats`."""
    version_fits: Callable[[int], bool] = lambda version: True
    """Whether a resources version fits the column (one that does not is not stored)."""


# ---------------------------------------------------------------------------- rollouts
def get_rollout(d: ReadDialect, rollout_id: str) -> Plan[Rollout]:
    p = d.pages.param
    row = yield Query(f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE rollout_id = {p}", (rollout_id,))
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return rollout_from_row(row)


def query_rollouts(
    d: ReadDialect,
    *,
    status: Sequence[str] | None,
    mode: str | None,
    rollout_ids: Sequence[str] | None,
    needle: str | None,
    sort_by: str,
    descending: bool,
    limit: int,
    after: tuple[Any, str] | None,
) -> Plan[Page[Rollout]]:
    where, params = d.filters(status, mode, rollout_ids, needle)
    sql, values = rollout_page_query(
        d.pages, ROLLOUT_COLUMNS, where, params, sort_by=sort_by, descending=descending, limit=limit, after=after
    )
    rows = yield Query(sql, values, all_rows=True)
    return rollout_page(rows, limit, sort_by)


def count_rollouts(
    d: ReadDialect, *, status: Sequence[str] | None, mode: str | None, needle: str | None, cap: int | None
) -> Plan[int]:
    where, params = d.filters(status, mode, None, needle)
    row = yield Query(*rollout_count_query(d.pages, where, params, cap))
    return int(row[0])


def get_latest_attempts(d: ReadDialect, rollout_ids: list[str]) -> Plan[dict[str, Attempt]]:
    rows = yield d.latest_attempts(rollout_ids)
    attempts = [attempt_from_row(r) for r in rows]
    return {a.rollout_id: a for a in attempts}


# ---------------------------------------------------------------------------- attempts
def get_attempt(d: ReadDialect, rollout_id: str, attempt_id: str) -> Plan[Attempt]:
    p = d.pages.param
    row = yield Query(f"SELECT {d.attempt_columns} FROM attempts WHERE attempt_id = {p}", (attempt_id,))
    if row is None or row[2] != rollout_id:
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
    return attempt_from_row(row)


def _rollout_key(d: ReadDialect, rollout_id: str) -> Plan[tuple[int, str | None]]:
    """The rollout's ``seq`` and latest attempt id, or :class:`NotFoundError`."""
    p = d.pages.param
    row = yield Query(f"SELECT seq, latest_attempt_id FROM rollouts WHERE rollout_id = {p}", (rollout_id,))
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return row[0], row[1]


def query_attempts(d: ReadDialect, rollout_id: str) -> Plan[list[Attempt]]:
    seq, _ = yield from _rollout_key(d, rollout_id)
    p = d.pages.param
    sql = f"SELECT {d.attempt_columns} FROM attempts WHERE rollout_seq = {p} ORDER BY sequence_id"
    rows = yield Query(sql, (seq,), all_rows=True)
    return [attempt_from_row(r) for r in rows]


# ---------------------------------------------------------------------------- spans
def query_spans(
    d: ReadDialect,
    rollout_id: str,
    attempt_id: str | None,
    *,
    name: str | None,
    limit: int,
    after: tuple[Any, str] | None,
) -> Plan[Page[Span]]:
    seq, latest = yield from _rollout_key(d, rollout_id)
    attempt_seq = None
    if attempt_id is not None:
        if attempt_id == "latest":
            attempt_id = latest
            if attempt_id is None:
                return Page[Span].model_construct(items=[], next_cursor=None)
        p = d.pages.param
        att = yield Query(f"SELECT rollout_id, sequence_id FROM attempts WHERE attempt_id = {p}", (attempt_id,))
        if att is None or att[0] != rollout_id:
            raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
        attempt_seq = att[1]
    sql, params = span_page_query(
        d.pages, d.span_data, rollout_seq=seq, attempt_seq=attempt_seq, name=name, limit=limit, after=after
    )
    rows = yield Query(sql, params, all_rows=True)
    return span_page(rows, limit)


# ---------------------------------------------------------------------------- resources
def get_resources(d: ReadDialect, version: int) -> Plan[Resources]:
    row = None
    if d.version_fits(version):
        row = yield Query(f"SELECT {RESOURCES_COLUMNS} FROM resources WHERE version = {d.pages.param}", (version,))
    if row is None:
        raise NotFoundError(f"resources version {version} not found")
    return resources_from_row(row)


def get_latest_resources(d: ReadDialect) -> Plan[Resources | None]:
    row = yield Query(f"SELECT {RESOURCES_COLUMNS} FROM resources ORDER BY version DESC LIMIT 1")
    return None if row is None else resources_from_row(row)


def query_resources(d: ReadDialect, *, limit: int, after: tuple[Any, str] | None) -> Plan[Page[Resources]]:
    rows = yield Query(*resources_page_query(d.pages, limit=limit, after=after), all_rows=True)
    return resources_page(rows, limit)


# ---------------------------------------------------------------------------- workers & stats
def get_worker(d: ReadDialect, worker_id: str) -> Plan[Worker]:
    row = yield Query(f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = {d.pages.param}", (worker_id,))
    if row is None:
        raise NotFoundError(f"worker {worker_id!r} not found")
    return worker_from_row(row)


def query_workers(d: ReadDialect) -> Plan[list[Worker]]:
    rows = yield Query(f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY worker_id", all_rows=True)
    return [worker_from_row(r) for r in rows]


def stats(d: ReadDialect) -> Plan[StoreStats]:
    return (yield from d.stats())


def store_stats(
    rollouts: dict[str, int], attempts: dict[str, int], spans: int, workers: int, latest: int | None
) -> StoreStats:
    """The stats from the counts by status (statuses with no row count 0)."""
    by_status = {s.value: 0 for s in RolloutStatus}
    by_status.update(rollouts)
    att_status = {s.value: 0 for s in AttemptStatus}
    att_status.update(attempts)
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


# ---------------------------------------------------------------------------- training metrics
def query_metrics(d: ReadDialect, run_id: str, after_step: int | None, limit: int) -> Plan[list[MetricRecord]]:
    p = d.pages.param
    after = -1 if after_step is None else min(max(after_step, -1), 2**63 - 1)
    rows = yield Query(
        f"SELECT step, timestamp, {d.metric_data} FROM metrics WHERE run_id = {p} AND step > {p} "
        f"ORDER BY step LIMIT {p}",
        (run_id, after, limit),
        all_rows=True,
    )
    # validated when written; rebuilding without validation keeps polling cheap
    return [
        MetricRecord.model_construct(run_id=run_id, step=step, timestamp=ts, values=orjson.loads(data))
        for step, ts, data in rows
    ]


def metric_runs(d: ReadDialect, limit: int) -> Plan[list[str]]:
    rows = yield Query(f"SELECT run_id FROM metric_runs ORDER BY last_write DESC LIMIT {d.pages.param}", (limit,), True)
    return [r[0] for r in rows]
