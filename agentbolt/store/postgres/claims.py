"""Claims on PostgreSQL: one statement takes queued rollouts and starts their attempts.

A claim is ONE statement of data-modifying CTEs (:data:`CLAIM`), and so are all the
claims of a write group (:func:`claim_together`; the group runs them at the place of its
first claim, see :mod:`agentbolt.store.postgres.together`)::

    WITH c       -- the claimers, in arrival order: worker, limit, request id
       , req     -- INSERT their request ids ON CONFLICT DO NOTHING: the ones seen before replay
       , fresh   -- the claimers that claim now, each with its slice of the queue
       , picked  -- SELECT ... ORDER BY seq LIMIT <their limits> FOR UPDATE SKIP LOCKED
       , claimed -- each picked rollout with its claimer, new attempt id and deadline
       , attempt -- INSERT the attempts
       , rollout -- UPDATE the rollouts (RETURNING their new state)
       , worker  -- upsert each claiming worker
    SELECT ...   -- per claimer: whether it claimed now, and its rollouts before and after

* **Exactly once.** ``FOR UPDATE SKIP LOCKED``: claimers in any group or server process
  skip each other's rows; each rollout gets exactly one new attempt, in the statement
  that locks it.
* **Queue order.** Rollouts go out by ``seq`` (enqueue order); the first claimer of a
  group gets the first ones, as if the claims had run one after the other.
* **One state machine.** The SQL applies :func:`~agentbolt.store.lifecycle.start_attempt`'s
  rules; Python applies that function to each rollout as it was before the claim (the
  models returned to the caller) and checks that the statement wrote exactly that state
  and deadline — a drift between the two is a loud error, not a silent difference.
* **Retries.** A claim's request id makes a retry return the same claims: the first claim
  with an id records it; a later one (or a concurrent one, once the first commits: the
  INSERT waits for it) finds it taken and replays, in a statement of its own (rare).
* Claimers that share a worker or a request id with an earlier claimer of the same group
  run after it, each in its own statement (one upsert may not touch a row twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbolt.store import lifecycle
from agentbolt.store.postgres.engine import PgTx
from agentbolt.store.postgres.rows import (
    ROLLOUT_WIDTH,
    attempt_columns,
    fetchall,
    rollout_columns,
)
from agentbolt.store.sql.rows import (
    ROLLOUT_STATE_COLUMNS,
    attempt_deadline,
    attempt_from_row,
    rollout_from_row,
    rollout_state,
)
from agentbolt.types import Claim, now

__all__ = ["CLAIM", "ClaimCall", "claim_rollouts", "claim_together"]

Conn = Any  # psycopg.AsyncConnection

_STATE = len(ROLLOUT_STATE_COLUMNS)

CLAIM = f"""
WITH c AS MATERIALIZED (
    SELECT u.ord, u.w, u.lim, u.req
    FROM unnest(%(w)b::text[], %(lim)b::int[], %(req)b::text[]) WITH ORDINALITY AS u(w, lim, req, ord)
), req AS (
    INSERT INTO claim_requests (request_id, created_at)
    SELECT c.req, %(t)s FROM c WHERE c.req IS NOT NULL ORDER BY c.ord
    ON CONFLICT (request_id) DO NOTHING RETURNING request_id
), fresh AS MATERIALIZED (
    SELECT c.ord, c.w, c.req, c.lim, sum(c.lim) OVER (ORDER BY c.ord) AS hi
    FROM c WHERE c.req IS NULL OR c.req IN (SELECT request_id FROM req)
), picked AS MATERIALIZED (
    SELECT {rollout_columns()}, (SELECT max(version) FROM resources) AS latest
    FROM rollouts WHERE status IN ('queuing', 'requeuing') ORDER BY seq
    LIMIT (SELECT coalesce(max(hi), 0) FROM fresh) FOR UPDATE SKIP LOCKED
), claimed AS MATERIALIZED (
    SELECT p.*, f.ord, f.w, f.req, 'at-' || replace(gen_random_uuid()::text, '-', '') AS aid,
        coalesce(p.resources_version, p.latest) AS rv,
        least(%(t)s + (p.config::jsonb ->> 'timeout_seconds')::float8,
              %(t)s + (p.config::jsonb ->> 'unresponsive_seconds')::float8) AS deadline
    FROM (SELECT picked.*, row_number() OVER (ORDER BY seq) AS rn FROM picked) p
    JOIN fresh f ON p.rn > f.hi - f.lim AND p.rn <= f.hi
), attempt AS (
    INSERT INTO attempts (attempt_id, rollout_id, rollout_seq, sequence_id, worker_id, status, start_time,
        last_heartbeat_time, resources_version, metadata, next_span_seq, deadline, claim_request_id)
    SELECT aid, rollout_id, seq, attempt_count + 1, w, 'preparing', %(t)s, %(t)s, rv, '{{}}', 0, deadline, req
    FROM claimed ORDER BY rn
), rollout AS (
    UPDATE rollouts r SET status = 'preparing', updated_at = %(t)s, start_time = coalesce(r.start_time, %(t)s),
        attempt_count = c.attempt_count + 1, latest_attempt_id = c.aid, reward = NULL, resources_version = c.rv
    FROM claimed c WHERE r.seq = c.seq
    RETURNING r.seq, {", ".join("r." + col for col in ROLLOUT_STATE_COLUMNS)}
), worker AS (
    INSERT INTO workers (worker_id, status, created_at, last_heartbeat_time, current_rollout_id,
        current_attempt_id, metadata)
    SELECT f.w, CASE WHEN l.aid IS NULL THEN 'idle' ELSE 'busy' END, %(t)s, %(t)s, l.rollout_id, l.aid, '{{}}'
    FROM fresh f LEFT JOIN LATERAL (
        SELECT cl.rollout_id, cl.aid FROM claimed cl WHERE cl.ord = f.ord ORDER BY cl.seq DESC LIMIT 1
    ) l ON true
    WHERE f.w IS NOT NULL ORDER BY f.ord
    ON CONFLICT (worker_id) DO UPDATE SET last_heartbeat_time = excluded.last_heartbeat_time,
        status = CASE WHEN excluded.current_attempt_id IS NULL THEN workers.status ELSE excluded.status END,
        current_rollout_id = CASE WHEN excluded.current_attempt_id IS NULL
            THEN workers.current_rollout_id ELSE excluded.current_rollout_id END,
        current_attempt_id = coalesce(excluded.current_attempt_id, workers.current_attempt_id)
)
SELECT c.ord, f.ord IS NOT NULL, {rollout_columns("cl.")}, cl.latest, cl.aid, cl.deadline,
    {", ".join("u." + col for col in ROLLOUT_STATE_COLUMNS)}
FROM c LEFT JOIN fresh f ON f.ord = c.ord LEFT JOIN claimed cl ON cl.ord = c.ord LEFT JOIN rollout u ON u.seq = cl.seq
ORDER BY c.ord, cl.seq
"""
"""One statement for the claims of several claimers (distinct workers and request ids)."""


ClaimCall = tuple[str | None, int, str | None]
"""A claim's arguments: worker id, limit, request id."""


async def claim_rollouts(
    conn: Conn, tx: PgTx, worker_id: str | None, limit: int, request_id: str | None
) -> list[Claim]:
    """One claim (the store's ``claim_rollouts``), in one statement."""
    return (await claim_together(conn, tx, [(worker_id, limit, request_id)]))[0]


async def claim_together(conn: Conn, tx: PgTx, calls: Sequence[ClaimCall]) -> list[list[Claim]]:
    """The claims of every call, in the order given: one :data:`CLAIM` statement for all
    the calls whose worker and request id no earlier call has, then one for each other."""
    first: list[int] = []
    later: list[int] = []
    workers: set[str] = set()
    requests: set[str] = set()
    for i, (worker_id, _, request_id) in enumerate(calls):
        if worker_id in workers or request_id in requests:
            later.append(i)
            continue
        first.append(i)
        if worker_id is not None:
            workers.add(worker_id)
        if request_id is not None:
            requests.add(request_id)
    out: list[list[Claim]] = [[] for _ in calls]
    for i, claims in zip(first, await _claim([calls[i] for i in first], conn), strict=True):
        out[i] = claims
    for i in later:
        out[i] = (await _claim([calls[i]], conn))[0]
    return out


async def _claim(calls: Sequence[ClaimCall], conn: Conn) -> list[list[Claim]]:
    t = now()
    rows = await fetchall(
        conn,
        CLAIM,
        {
            "w": [worker_id for worker_id, _, _ in calls],
            "lim": [limit for _, limit, _ in calls],
            "req": [request_id for _, _, request_id in calls],
            "t": t,
        },
    )
    out: list[list[Claim]] = [[] for _ in calls]
    for row in rows:
        k = row[0] - 1
        worker_id, _, request_id = calls[k]
        if not row[1]:  # its request id was claimed before: replay those claims
            assert request_id is not None
            out[k] = await _replay_claims(conn, request_id)
            continue
        if row[2] is None:  # nothing left in the queue for this claimer
            continue
        r = rollout_from_row(row[2 : 2 + ROLLOUT_WIDTH])
        latest, aid, deadline = row[2 + ROLLOUT_WIDTH : 5 + ROLLOUT_WIDTH]
        attempt = lifecycle.start_attempt(r, worker_id, t, latest, aid)
        written = row[5 + ROLLOUT_WIDTH : 5 + ROLLOUT_WIDTH + _STATE]
        if rollout_state(r) != written or attempt_deadline(r, attempt) != deadline:
            raise RuntimeError(
                f"bug: the claim statement wrote rollout {r.rollout_id} as {written} (deadline {deadline}), "
                f"lifecycle.start_attempt says {rollout_state(r)} (deadline {attempt_deadline(r, attempt)})"
            )
        out[k].append(Claim(rollout=r, attempt=attempt))
    return out


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
