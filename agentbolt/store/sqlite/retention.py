"""Deleting old spans from a :class:`~agentbolt.store.sqlite.SqliteStore`, a chunk at a time.

A store with millions of spans must not hold SQLite's write lock for the whole
deletion: runners posting spans would stall. So the deletion is a series of small write
ops, each removing at most ``chunk`` spans, walking the rollouts in ``seq`` order. Each op
runs in the writer thread's group transaction like any other write, so other writes
interleave between chunks. Freed pages are reused by later inserts; ``VACUUM`` (see
:func:`vacuum`) gives them back to the filesystem.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agentbolt.store.sqlite.engine import WriteTx
from agentbolt.types import RolloutStatus

__all__ = ["DELETE_CHUNK", "count_spans", "delete_span_chunk", "vacuum"]

DELETE_CHUNK = 1000
"""Most spans one write op deletes."""

_FINISHED = tuple(s.value for s in RolloutStatus if s.is_terminal)


def _where(before: float | None, rollout_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
    """The rollouts whose spans may go: finished, finished before ``before``, among the ids.

    ``+r.status`` keeps SQLite off the status index: walking rollouts by ``seq`` (the
    primary key) gives the chunk order without sorting the whole match.
    """
    where = [f"+r.status IN ({', '.join('?' for _ in _FINISHED)})"]
    params: list[Any] = list(_FINISHED)
    if before is not None:
        where.append("r.end_time < ?")
        params.append(float(before))
    if rollout_ids is not None:
        where.append(f"r.rollout_id IN ({', '.join('?' for _ in rollout_ids)})")
        params.extend(rollout_ids)
    return " AND ".join(where), params


def count_spans(conn: sqlite3.Connection, before: float | None, rollout_ids: Sequence[str] | None) -> int:
    """How many spans :func:`delete_span_chunk` calls would delete (a dry run)."""
    where, params = _where(before, rollout_ids)
    sql = f"SELECT count(*) FROM rollouts r JOIN spans s ON s.rollout_seq = r.seq WHERE {where}"
    return int(conn.execute(sql, params).fetchone()[0])


def delete_span_chunk(
    conn: sqlite3.Connection,
    tx: WriteTx,
    before: float | None,
    rollout_ids: Sequence[str] | None,
    from_seq: int,
    chunk: int = DELETE_CHUNK,
) -> tuple[int, int]:
    """Delete up to ``chunk`` spans of matching rollouts with ``seq >= from_seq``.

    Returns ``(deleted, last_seq)``: call again from ``last_seq`` while ``deleted ==
    chunk`` (the last rollout may have more spans left)."""
    where, params = _where(before, rollout_ids)
    rows = conn.execute(
        f"SELECT s.rowid, r.seq FROM rollouts r JOIN spans s ON s.rollout_seq = r.seq "
        f"WHERE r.seq >= ? AND {where} ORDER BY r.seq LIMIT ?",
        [from_seq, *params, chunk],
    ).fetchall()
    if not rows:
        return 0, from_seq
    conn.executemany("DELETE FROM spans WHERE rowid = ?", [(rowid,) for rowid, _ in rows])
    return len(rows), int(rows[-1][1])


def vacuum(conn: sqlite3.Connection) -> None:
    """Rewrite the file without its free pages, then shrink the write-ahead log.

    Needs a connection outside any transaction; it takes the write lock for as long as
    the rewrite lasts (seconds per GB), so run it when the store is quiet."""
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
