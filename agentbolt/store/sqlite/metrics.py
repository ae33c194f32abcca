"""Training metrics in :class:`~agentbolt.store.sqlite.SqliteStore`: the write op, run
by the group-commit writer like every other write (the reads are the shared plans of
:mod:`agentbolt.store.sql.reads`).

Tables (schema migration 2): ``metrics`` keyed by ``(run_id, step)`` with the values as
a JSON object, and ``metric_runs`` holding each run's last-write counter so runs list
most recent first without scanning the metrics.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from agentbolt.store.metric_records import merge_record
from agentbolt.store.sqlite.engine import WriteTx
from agentbolt.types import MetricRecord

__all__ = ["add_metrics"]


def _record(run_id: str, step: int, timestamp: float, data: str) -> MetricRecord:
    # validated when written; rebuilding without validation keeps polling cheap
    return MetricRecord.model_construct(run_id=run_id, step=step, timestamp=timestamp, values=orjson.loads(data))


def add_metrics(conn: sqlite3.Connection, tx: WriteTx, records: Sequence[MetricRecord]) -> None:
    """Upsert each record, merging into the stored step (see :func:`merge_record`)."""
    touched: dict[str, None] = {}  # runs written, in order of their last record
    for rec in records:
        row = conn.execute(
            "SELECT timestamp, data FROM metrics WHERE run_id = ? AND step = ?", (rec.run_id, rec.step)
        ).fetchone()
        stored = None if row is None else _record(rec.run_id, rec.step, row[0], row[1])
        merged = merge_record(stored, rec)
        conn.execute(
            "INSERT OR REPLACE INTO metrics (run_id, step, timestamp, data) VALUES (?, ?, ?, ?)",
            (merged.run_id, merged.step, merged.timestamp, orjson.dumps(merged.values).decode()),
        )
        touched.pop(rec.run_id, None)
        touched[rec.run_id] = None
    if not touched:
        return
    (last,) = conn.execute("SELECT COALESCE(MAX(last_write), 0) FROM metric_runs").fetchone()
    conn.executemany(
        "INSERT INTO metric_runs (run_id, last_write) VALUES (?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET last_write = excluded.last_write",
        [(run_id, last + i) for i, run_id in enumerate(touched, start=1)],
    )
