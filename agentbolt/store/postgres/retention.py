"""Deleting old spans from a :class:`~agentbolt.store.postgres.PostgresStore`, a chunk of
rollouts per transaction.

Only finished rollouts lose spans (see :meth:`agentbolt.store.base.Store.delete_spans`).
Short transactions keep a large deletion from holding many row locks, or one long
snapshot, while runners keep writing; autovacuum reuses the space afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbolt.store.postgres.engine import PgTx
from agentbolt.store.postgres.rows import fetchall, fetchone
from agentbolt.types import RolloutStatus

__all__ = ["DELETE_CHUNK", "count_deletable_spans", "delete_span_chunk"]

Conn = Any  # psycopg.AsyncConnection

_FINISHED = [s.value for s in RolloutStatus if s.is_terminal]
DELETE_CHUNK = 200
"""Rollouts whose spans one transaction deletes: short transactions, so a large
deletion never holds many locks (or a long snapshot) while runners keep writing."""


def _finished_where(before: float | None, rollout_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
    where = ["status = ANY(%s)"]
    params: list[Any] = [_FINISHED]
    if before is not None:
        where.append("end_time < %s")
        params.append(float(before))
    if rollout_ids is not None:
        where.append("rollout_id = ANY(%s)")
        params.append(list(rollout_ids))
    return " AND ".join(where), params


async def count_deletable_spans(conn: Conn, tx: PgTx, before: float | None, rollout_ids: Sequence[str] | None) -> int:
    """How many spans :func:`delete_span_chunk` calls would delete (a dry run)."""
    where, params = _finished_where(before, rollout_ids)
    row = await fetchone(
        conn, f"SELECT count(*) FROM spans WHERE rollout_seq IN (SELECT seq FROM rollouts WHERE {where})", params
    )
    return 0 if row is None else int(row[0])


async def delete_span_chunk(
    conn: Conn, tx: PgTx, before: float | None, rollout_ids: Sequence[str] | None, after_seq: int
) -> tuple[int, int | None]:
    """Delete the spans of the next :data:`DELETE_CHUNK` matching rollouts with ``seq >
    after_seq``. Returns ``(deleted, last_seq)``; ``last_seq`` is None when none was left."""
    where, params = _finished_where(before, rollout_ids)
    rows = await fetchall(
        conn,
        f"SELECT seq FROM rollouts WHERE seq > %s AND {where} ORDER BY seq LIMIT %s",
        (after_seq, *params, DELETE_CHUNK),
    )
    if not rows:
        return 0, None
    seqs = [r[0] for r in rows]
    row = await fetchone(
        conn,
        "WITH gone AS (DELETE FROM spans WHERE rollout_seq = ANY(%s) RETURNING 1) SELECT count(*) FROM gone",
        (seqs,),
    )
    return (0 if row is None else int(row[0])), seqs[-1]
