"""Training metrics in :class:`~agentbolt.store.postgres.PostgresStore`.

``metrics`` holds one row per ``(run_id, step)`` with the values as JSONB; a second
record for the same step merges in SQL (``data || new``: new keys added, same keys
overwritten, the newer timestamp kept — :func:`agentbolt.store.metric_records.merge_record`'s
rule). ``metric_runs`` keeps each run's last write (a sequence), so runs list most recent
first without scanning the metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store.postgres_engine import PgTx
from agentbolt.types import MetricRecord

__all__ = ["add_metrics", "metric_runs", "query_metrics"]

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


async def query_metrics(conn: Any, tx: PgTx, run_id: str, after_step: int | None, limit: int) -> list[MetricRecord]:
    after = -1 if after_step is None else min(max(after_step, -1), 2**63 - 1)
    cur = await conn.execute(
        "SELECT step, timestamp, data::text FROM metrics WHERE run_id = %s AND step > %s ORDER BY step LIMIT %s",
        (run_id, after, limit),
    )
    rows = await cur.fetchall()
    # validated when written; rebuilding without validation keeps polling cheap
    return [
        MetricRecord.model_construct(run_id=run_id, step=step, timestamp=ts, values=orjson.loads(data))
        for step, ts, data in rows
    ]


async def metric_runs(conn: Any, tx: PgTx, limit: int) -> list[str]:
    cur = await conn.execute("SELECT run_id FROM metric_runs ORDER BY last_write DESC LIMIT %s", (limit,))
    return [r[0] for r in await cur.fetchall()]
