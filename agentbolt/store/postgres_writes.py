"""The write operations of :class:`~agentbolt.store.postgres.PostgresStore`.

Each function runs inside one transaction (see
:class:`~agentbolt.store.postgres_engine.PgEngine`), on a database that several server
processes may share. The pattern is the one of every backend — load the rows, apply the
pure state machine of :mod:`agentbolt.store.lifecycle`, write back what changed — with
row locks making it safe across processes:

* every row that an op changes is read ``FOR UPDATE``, rollout before attempt (and
  several rollouts in ``seq`` order), so two servers never apply a transition to the
  same stale row;
* claims take queued rollouts with ``FOR UPDATE SKIP LOCKED``: concurrent claimers
  (in any process) skip each other's rows instead of waiting, and each rollout gets
  exactly one new attempt;
* the deadline checker takes expired attempts with ``SKIP LOCKED`` too, so it can run
  in every server at once without expiring an attempt twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store import lifecycle
from agentbolt.store.errors import NotFoundError
from agentbolt.store.postgres_engine import PgTx
from agentbolt.store.postgres_rows import (
    ROLLOUT_WIDTH,
    PgAttempt,
    PgRollout,
    attempt_columns,
    fetchall,
    fetchone,
    rollout_columns,
    span_json,
)
from agentbolt.store.span_plan import SpanKey, plan_spans
from agentbolt.store.sql_changes import (
    apply_attempt_update,
    apply_new_spans,
    apply_rollout_metadata,
    is_cancel,
    note_finish,
    worker_values,
)
from agentbolt.store.sql_rows import (
    WORKER_COLUMNS,
    attempt_deadline,
    attempt_from_row,
    dumps,
    rollout_from_row,
    worker_from_row,
)
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Claim,
    ErrorInfo,
    Resources,
    Rollout,
    RolloutCreate,
    RolloutStatus,
    Span,
    Worker,
    WorkerStatus,
    new_id,
    now,
)

__all__ = [
    "add_resources",
    "add_spans",
    "any_due",
    "check_deadlines",
    "claim_rollouts",
    "enqueue_rollouts",
    "heartbeat",
    "update_attempt",
    "update_rollout",
    "update_worker",
]

Conn = Any  # psycopg.AsyncConnection

# FOR UPDATE on this join locks the rollout row before the attempt row (the order of the
# FROM list), like every other write: two writers never wait on each other in a cycle
_PAIR = (
    f"SELECT {rollout_columns('r.', light=True)}, {attempt_columns('a.')} "
    "FROM rollouts r JOIN attempts a ON r.seq = a.rollout_seq"
)


# ---------------------------------------------------------------------------- loading


async def _lock_rollout(conn: Conn, rollout_id: str, *, light: bool = False) -> PgRollout:
    row = await fetchone(
        conn, f"SELECT {rollout_columns(light=light)} FROM rollouts WHERE rollout_id = %s FOR UPDATE", (rollout_id,)
    )
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return PgRollout.from_row(row, light=light)


async def _lock_attempt(conn: Conn, rollout: PgRollout, attempt_id: str) -> PgAttempt:
    row = await fetchone(
        conn, f"SELECT {attempt_columns()} FROM attempts WHERE attempt_id = %s FOR UPDATE", (attempt_id,)
    )
    if row is None or row[2] != rollout.model.rollout_id:
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout.model.rollout_id!r} not found")
    return PgAttempt.from_row(row, rollout.model)


async def _lock_pair(conn: Conn, rollout_id: str, attempt_id: str) -> tuple[PgRollout, PgAttempt]:
    """The rollout (without input/metadata) and the attempt, both locked, in one query."""
    row = await fetchone(
        conn, f"{_PAIR} WHERE a.attempt_id = %s AND a.rollout_id = %s FOR UPDATE", (attempt_id, rollout_id)
    )
    if row is None:
        if await fetchone(conn, "SELECT 1 FROM rollouts WHERE rollout_id = %s", (rollout_id,)) is None:
            raise NotFoundError(f"rollout {rollout_id!r} not found")
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
    lr = PgRollout.from_row(row[:ROLLOUT_WIDTH], light=True)
    return lr, PgAttempt.from_row(row[ROLLOUT_WIDTH:], lr.model)


async def _latest_version(conn: Conn) -> int | None:
    row = await fetchone(conn, "SELECT max(version) FROM resources")
    return None if row is None else row[0]


async def _release_worker(conn: Conn, attempt: Attempt) -> None:
    """A worker whose current attempt finished is idle again."""
    if attempt.worker_id is not None and not attempt.status.is_active:
        await conn.execute(
            "UPDATE workers SET status = 'idle', current_rollout_id = NULL, current_attempt_id = NULL "
            "WHERE worker_id = %s AND current_attempt_id = %s",
            (attempt.worker_id, attempt.attempt_id),
        )


async def _run_all(conn: Conn, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
    """Run several statements; the same statement many times goes as one pipelined batch."""
    by_sql: dict[str, list[tuple[Any, ...]]] = {}
    for sql, params in statements:
        by_sql.setdefault(sql, []).append(params)
    for sql, rows in by_sql.items():
        if len(rows) == 1:
            await conn.execute(sql, rows[0])
        else:
            async with conn.cursor() as cur:
                await cur.executemany(sql, rows)


# ---------------------------------------------------------------------------- rollouts
_INSERT_ROLLOUTS = (
    "INSERT INTO rollouts (rollout_id, status, mode, created_at, updated_at, attempt_count, "
    "resources_version, input, config, metadata) "
    "SELECT u.rid, 'queuing', u.mode, %s, %s, 0, u.rv, u.input, u.config, u.metadata "
    "FROM unnest(%b::text[], %b::text[], %b::int[], %b::text[], %b::text[], %b::text[]) "
    "WITH ORDINALITY AS u(rid, mode, rv, input, config, metadata, ord) ORDER BY u.ord "
    "ON CONFLICT (rollout_id) DO NOTHING RETURNING rollout_id"
)


async def enqueue_rollouts(conn: Conn, tx: PgTx, specs: Sequence[RolloutCreate]) -> list[Rollout]:
    t = now()
    given = list(dict.fromkeys(s.rollout_id for s in specs if s.rollout_id is not None))
    known: dict[str, Rollout] = {}
    if given:
        rows = await fetchall(conn, f"SELECT {rollout_columns()} FROM rollouts WHERE rollout_id = ANY(%b)", (given,))
        known = {row[1]: rollout_from_row(row) for row in rows}
    latest = await _latest_version(conn) or 0
    new: dict[str, tuple[RolloutCreate, Rollout, tuple[str, str, str]]] = {}
    order: list[str] = []
    for spec in specs:
        rid = spec.rollout_id or new_id("ro")
        order.append(rid)
        if rid in known or rid in new:
            continue
        if spec.resources_version is not None and not 1 <= spec.resources_version <= latest:
            raise NotFoundError(f"resources version {spec.resources_version} not found")
        config = spec.config.model_copy(deep=True)
        texts = (dumps(spec.input), dumps(config.__dict__), dumps(spec.metadata))
        r = Rollout.model_validate(
            {
                "rollout_id": rid,
                "input": orjson.loads(texts[0]),
                "mode": spec.mode,
                "resources_version": spec.resources_version,
                "config": config,
                "metadata": orjson.loads(texts[2]),
                "created_at": t,
                "updated_at": t,
            }
        )
        new[rid] = (spec, r, texts)
    if new:
        items = list(new.items())
        inserted = await fetchall(
            conn,
            _INSERT_ROLLOUTS,
            (
                t,
                t,
                [rid for rid, _ in items],
                [spec.mode.value for _, (spec, _, _) in items],
                [spec.resources_version for _, (spec, _, _) in items],
                [texts[0] for _, (_, _, texts) in items],
                [texts[1] for _, (_, _, texts) in items],
                [texts[2] for _, (_, _, texts) in items],
            ),
        )
        stored = {row[0] for row in inserted}
        raced = [rid for rid in new if rid not in stored]  # enqueued meanwhile by another server
        if raced:
            rows = await fetchall(
                conn, f"SELECT {rollout_columns()} FROM rollouts WHERE rollout_id = ANY(%b)", (raced,)
            )
            known.update({row[1]: rollout_from_row(row) for row in rows})
        for rid in stored:
            known[rid] = new[rid][1]
    return [known[rid].model_copy(deep=True) for rid in order]


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
        await _run_all(conn, saves)
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


async def update_rollout(
    conn: Conn, tx: PgTx, rollout_id: str, status: RolloutStatus | None, metadata: dict[str, Any] | None
) -> Rollout:
    lr = await _lock_rollout(conn, rollout_id)
    r = lr.model
    before = r.status
    if is_cancel(r, status):
        la = await _lock_attempt(conn, lr, r.latest_attempt_id) if r.latest_attempt_id is not None else None
        lifecycle.cancel_rollout(r, la.model if la else None, now())
        if la is not None:
            await la.save(conn, r)
            await _release_worker(conn, la.model)
    apply_rollout_metadata(r, metadata)
    await lr.save(conn, metadata_changed=bool(metadata))
    note_finish(tx, before, r)
    return r


# ---------------------------------------------------------------------------- attempts
async def update_attempt(
    conn: Conn,
    tx: PgTx,
    rollout_id: str,
    attempt_id: str,
    status: AttemptStatus | None,
    error: ErrorInfo | None,
    metadata: dict[str, Any] | None,
) -> Attempt:
    lr, la = await _lock_pair(conn, rollout_id, attempt_id)
    r, a = lr.model, la.model
    before = r.status
    apply_attempt_update(r, a, status, error, metadata)
    await _run_all(conn, la.update(r, metadata_changed=bool(metadata)) + lr.update())
    await _release_worker(conn, a)
    note_finish(tx, before, r)
    return a


async def heartbeat(conn: Conn, tx: PgTx, rollout_id: str, attempt_id: str) -> Attempt:
    lr, la = await _lock_pair(conn, rollout_id, attempt_id)
    r, a = lr.model, la.model
    t = now()
    lifecycle.touch_attempt(r, a, t)
    statements = la.update(r) + lr.update()
    if a.worker_id is not None:
        statements.append(("UPDATE workers SET last_heartbeat_time = %s WHERE worker_id = %s", (t, a.worker_id)))
    await _run_all(conn, statements)
    return a


# ---------------------------------------------------------------------------- spans
_INSERT_SPANS = (
    "INSERT INTO spans (rollout_seq, attempt_seq, span_id, sequence_id, name, start_time, data, raw) "
    "SELECT * FROM unnest(%b::bigint[], %b::int[], %b::text[], %b::bigint[], %b::text[], %b::float8[], "
    "%b::jsonb[], %b::text[])"
)


async def _lock_targets(conn: Conn, spans: Sequence[Span]) -> dict[SpanKey, tuple[PgRollout, PgAttempt]]:
    """Every attempt the batch writes to, with its rollout, locked in rollout order.
    One unknown attempt rejects the whole batch."""
    keys = list(dict.fromkeys((s.rollout_id, s.attempt_id) for s in spans))
    rows = await fetchall(
        conn,
        f"{_PAIR} WHERE a.attempt_id = ANY(%b) ORDER BY r.seq, a.sequence_id FOR UPDATE",
        ([aid for _, aid in keys],),
    )
    rollouts: dict[str, PgRollout] = {}
    targets: dict[SpanKey, tuple[PgRollout, PgAttempt]] = {}
    for row in rows:
        rid = row[1]
        lr = rollouts.get(rid)
        if lr is None:
            lr = rollouts[rid] = PgRollout.from_row(row[:ROLLOUT_WIDTH], light=True)
        la = PgAttempt.from_row(row[ROLLOUT_WIDTH:], lr.model)
        targets[(rid, la.model.attempt_id)] = (lr, la)
    for key in keys:
        if key not in targets:
            raise NotFoundError(f"attempt {key[1]!r} of rollout {key[0]!r} not found")
    return targets


async def _stored_spans(
    conn: Conn, spans: Sequence[Span], targets: dict[SpanKey, tuple[PgRollout, PgAttempt]]
) -> dict[SpanKey, dict[str, str]]:
    """The JSON of the batch's spans that are already stored, by key and span id."""
    seqs, aseqs, ids = [], [], []
    for s in spans:
        lr, la = targets[(s.rollout_id, s.attempt_id)]
        seqs.append(lr.seq)
        aseqs.append(la.model.sequence_id)
        ids.append(s.span_id)
    rows = await fetchall(
        conn,
        "SELECT s.rollout_seq, s.attempt_seq, s.span_id, coalesce(s.data::text, s.raw) FROM spans s "
        "JOIN unnest(%b::bigint[], %b::int[], %b::text[]) AS u(rs, ats, sid) "
        "ON s.rollout_seq = u.rs AND s.attempt_seq = u.ats AND s.span_id = u.sid",
        (seqs, aseqs, ids),
    )
    by_position = {(lr.seq, la.model.sequence_id): key for key, (lr, la) in targets.items()}
    stored: dict[SpanKey, dict[str, str]] = {}
    for rseq, aseq, sid, data in rows:
        stored.setdefault(by_position[(rseq, aseq)], {})[sid] = data
    return stored


async def add_spans(conn: Conn, tx: PgTx, spans: Sequence[Span]) -> list[Span]:
    targets = await _lock_targets(conn, spans)
    plan = plan_spans(spans, targets, await _stored_spans(conn, spans, targets))
    if plan.rows:
        cols: list[list[Any]] = [[] for _ in range(8)]
        for row in plan.rows:
            for i in range(6):
                cols[i].append(row[i])
            data, raw = span_json(row[6])
            cols[6].append(data)
            cols[7].append(raw)
        await conn.execute(_INSERT_SPANS, cols)
    apply_new_spans(plan.new, targets)
    statements: list[tuple[str, tuple[Any, ...]]] = []
    rollouts: dict[int, PgRollout] = {}
    for key, (lr, la) in targets.items():
        la.next_span_seq = plan.next_seq[key]
        statements.extend(la.update(lr.model))
        rollouts[lr.seq] = lr
    for lr in rollouts.values():
        statements.extend(lr.update())
    await _run_all(conn, statements)
    return plan.out


# ---------------------------------------------------------------------------- resources & workers
async def add_resources(conn: Conn, tx: PgTx, bundle: Resources) -> Resources:
    """Store ``bundle`` (already validated) as the next version. The table lock makes
    concurrent publishers (in several servers) take consecutive versions."""
    await conn.execute("LOCK TABLE resources IN SHARE ROW EXCLUSIVE MODE")
    row = await fetchone(conn, "SELECT coalesce(max(version), 0) + 1 FROM resources")
    assert row is not None
    version = row[0]
    bundle = bundle.model_copy(update={"version": version})
    await conn.execute(
        "INSERT INTO resources (version, created_at, resources, metadata) VALUES (%s, %s, %s, %s)",
        (version, bundle.created_at, dumps(bundle.resources), dumps(bundle.metadata)),
    )
    return bundle


async def update_worker(
    conn: Conn, tx: PgTx, worker_id: str, status: WorkerStatus | None, metadata: dict[str, Any] | None
) -> Worker:
    t = now()
    row = await fetchone(conn, f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = %s FOR UPDATE", (worker_id,))
    w = worker_from_row(row) if row is not None else Worker(worker_id=worker_id, created_at=t, last_heartbeat_time=t)
    lifecycle.refresh_worker(w, t, status, metadata)
    await conn.execute(
        f"INSERT INTO workers ({WORKER_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (worker_id) DO UPDATE SET status = excluded.status, "
        "last_heartbeat_time = excluded.last_heartbeat_time, current_rollout_id = excluded.current_rollout_id, "
        "current_attempt_id = excluded.current_attempt_id, metadata = excluded.metadata",
        worker_values(w),
    )
    return w


# ---------------------------------------------------------------------------- deadlines
_DEADLINE_SLACK = 1e-6  # the index prefilters; lifecycle.expired_status decides exactly


async def any_due(conn: Conn, tx: PgTx) -> bool:
    """Whether some attempt is past its deadline: one indexed probe, so that the frequent
    deadline checks open a write transaction only when there is work."""
    row = await fetchone(
        conn, "SELECT 1 FROM attempts WHERE deadline IS NOT NULL AND deadline <= %s LIMIT 1", (now() + _DEADLINE_SLACK,)
    )
    return row is not None


async def check_deadlines(conn: Conn, tx: PgTx) -> int:
    t = now()
    # SKIP LOCKED: an attempt that another server is expiring (or a runner is reporting)
    # right now is left to it; the next check sees it again if still due
    rows = await fetchall(
        conn,
        f"{_PAIR} WHERE a.deadline IS NOT NULL AND a.deadline <= %s ORDER BY r.seq FOR UPDATE SKIP LOCKED",
        (t + _DEADLINE_SLACK,),
    )
    rollouts: dict[str, PgRollout] = {}
    statements: list[tuple[str, tuple[Any, ...]]] = []
    expired = 0
    for row in rows:
        lr = rollouts.get(row[1])
        if lr is None:
            lr = rollouts[row[1]] = PgRollout.from_row(row[:ROLLOUT_WIDTH], light=True)
        r = lr.model
        la = PgAttempt.from_row(row[ROLLOUT_WIDTH:], r)
        before = r.status
        if lifecycle.expire_attempt(r, la.model, t):
            expired += 1
        statements.extend(la.update(r))
        note_finish(tx, before, r)
    for lr in rollouts.values():
        statements.extend(lr.update())
    await _run_all(conn, statements)
    return expired
