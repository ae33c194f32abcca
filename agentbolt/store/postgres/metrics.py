"""Training metrics in :class:`~agentbolt.store.postgres.PostgresStore`.

``metrics`` holds one row per ``(run_id, step)`` with the values as JSONB; a second
record for the same step merges in SQL (``data || new``: new keys added, same keys
overwritten, the newer timestamp kept — :func:`agentbolt.store.metric_records.merge_record`'s
rule). ``metric_runs`` keeps each run's last write (a sequence), so runs list most recent
first without scanning the metrics. The reads are the shared plans of
:mod:`agentbolt.store.sql.reads`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store.postgres.engine import PgTx
from agentbolt.types import MetricRecord

__all__ = ["add_metrics"]

_UPSERT = (
    "INSERT INTO metrics (run_id, step, timestamp, data) VALUES (%s, %s, %s, %s::jsonb) "
    "ON CONFLICT (run_id, step) DO UPDATE SET data = metrics.data || excluded.data, "
    "timestamp = greatest(metrics.timestamp, excluded.timestamp)"
)


async def add_metrics(conn: Any, tx: PgTx, records: Sequence[MetricRecord]) -> None:
    """Upsert each record in order (one pipelined batch), then bump the runs written."""
    async with conn.cursor() as cur:
        await cur.executemany(
            _UPSERT, [(r.run_id, r.step, r.timestamp, orjson.dumps(r.values).decode()) for r in records]
        )
    touched: dict[str, None] = {}  # runs written, in order of their last record
    for r in records:
        touched.pop(r.run_id, None)
        touched[r.run_id] = None
    async with conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO metric_runs (run_id, last_write) VALUES (%s, nextval('metric_writes')) "
            "ON CONFLICT (run_id) DO UPDATE SET last_write = excluded.last_write",
            [(run_id,) for run_id in touched],
        )
