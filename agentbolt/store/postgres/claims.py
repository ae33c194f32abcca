"""Claims on PostgreSQL: queued rollouts taken with ``FOR UPDATE SKIP LOCKED``.

Concurrent claimers (in any server process) skip each other's rows instead of waiting,
and each claimed rollout gets exactly one new attempt, inserted in the same transaction.
A claim's request id makes a retry return the same claims: the first claim with an id
records it, a later one (or a concurrent one, once the first commits) replays.
"""

from __future__ import annotations

from typing import Any

from agentbolt.store import lifecycle
from agentbolt.store.postgres.engine import PgTx
from agentbolt.store.postgres.locking import run_all
from agentbolt.store.postgres.rows import (
    ROLLOUT_WIDTH,
    PgRollout,
    attempt_columns,
    fetchall,
    fetchone,
    rollout_columns,
)
from agentbolt.store.sql.rows import (
    attempt_deadline,
    attempt_from_row,
    rollout_from_row,
)
from agentbolt.types import Claim, WorkerStatus, now

__all__ = ["claim_rollouts"]

Conn = Any  # psycopg.AsyncConnection

_INSERT_ATTEMPTS = (
    "INSERT INTO attempts (attempt_id, rollout_id, rollout_seq, sequence_id, worker_id, status, start_time, "
    "last_heartbeat_time, resources_version, metadata, next_span_seq, deadline, claim_request_id) "
    "SELECT u.aid, u.rid, u.seq, u.n, %s, 'preparing', %s, %s, u.rv, '{}', 0, u.deadline, %s "
    "FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::int[], %b::int[], %b::float8[]) "
    "WITH ORDINALITY AS u(aid, rid, seq, n, rv, deadline, ord) ORDER BY u.ord"
)

_UPSERT_CLAIMING_WORKER = (
    "INSERT INTO workers (worker_id, status, created_at, last_heartbeat_time, current_rollout_id, "
    "current_attempt_id, metadata) VALUES (%(w)s, %(status)s, %(t)s, %(t)s, %(rid)s, %(aid)s, '{}') "
    "ON CONFLICT (worker_id) DO UPDATE SET last_heartbeat_time = excluded.last_heartbeat_time, "
    "status = CASE WHEN %(busy)s THEN excluded.status ELSE workers.status END, "
    "current_rollout_id = CASE WHEN %(busy)s THEN excluded.current_rollout_id ELSE workers.current_rollout_id END, "
    "current_attempt_id = CASE WHEN %(busy)s THEN excluded.current_attempt_id ELSE workers.current_attempt_id END"
)


async def _replay_claims(conn: Conn, request_id: str) -> list[Claim]:
    rows = await fetchall(
        conn,
        f"SELECT {rollout_columns('r.')}, {attempt_columns('a.')} FROM attempts a "
        "JOIN rollouts r ON r.seq = a.rollout_seq WHERE a.claim_request_id = %s ORDER BY a.claim_order",
        (request_id,),
    )
    return [
        Claim(rollout=rollout_from_row(row[:ROLLOUT_WIDTH]), attempt=attempt_from_row(row[ROLLOUT_WIDTH:]))
        for row in rows
    ]


async def claim_rollouts(
    conn: Conn, tx: PgTx, worker_id: str | None, limit: int, request_id: str | None
) -> list[Claim]:
    t = now()
    if request_id is not None:
        # a concurrent claim with the same id (another server) waits here for that one to
        # commit, then finds the request taken and replays its claims
        first = await fetchone(
            conn,
            "INSERT INTO claim_requests (request_id, created_at) VALUES (%s, %s) "
            "ON CONFLICT (request_id) DO NOTHING RETURNING 1",
            (request_id, t),
        )
        if first is None:
            return await _replay_claims(conn, request_id)
    # the latest resources version rides along with the claimed rows (one statement)
    rows = await fetchall(
        conn,
        f"SELECT {rollout_columns()}, (SELECT max(version) FROM resources) FROM rollouts "
        "WHERE status IN ('queuing', 'requeuing') ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED",
        (limit,),
    )
    latest = rows[0][ROLLOUT_WIDTH] if rows else None
    claims: list[Claim] = []
    saves: list[tuple[str, tuple[Any, ...]]] = []
    for row in rows:
        lr = PgRollout.from_row(row[:ROLLOUT_WIDTH])
        r = lr.model
        att = lifecycle.start_attempt(r, worker_id, t, latest)
        saves.extend(lr.update())
        claims.append(Claim(rollout=r, attempt=att))
    if claims:
        await conn.execute(
            _INSERT_ATTEMPTS,
            (
                worker_id,
                t,
                t,
                request_id,
                [c.attempt.attempt_id for c in claims],
                [c.rollout.rollout_id for c in claims],
                [row[0] for row in rows],
                [c.attempt.sequence_id for c in claims],
                [c.attempt.resources_version for c in claims],
                [attempt_deadline(c.rollout, c.attempt) for c in claims],
            ),
        )
        await run_all(conn, saves)
    if worker_id is not None:
        last = claims[-1] if claims else None
        await conn.execute(
            _UPSERT_CLAIMING_WORKER,
            {
                "w": worker_id,
                "status": WorkerStatus.BUSY.value if last else WorkerStatus.IDLE.value,
                "t": t,
                "rid": last.rollout.rollout_id if last else None,
                "aid": last.attempt.attempt_id if last else None,
                "busy": last is not None,
            },
        )
    return claims
