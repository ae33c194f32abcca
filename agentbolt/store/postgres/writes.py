"""The write operations of :class:`~agentbolt.store.postgres.PostgresStore`.

Each function runs inside one transaction (see
:class:`~agentbolt.store.postgres.engine.PgEngine`), on a database that several server
processes may share. The pattern is the one of every backend — load the rows, apply the
pure state machine of :mod:`agentbolt.store.lifecycle`, write back what changed — with
row locks making it safe across processes:

* every row that an op changes is read ``FOR UPDATE``, rollout before attempt (and
  several rollouts in ``seq`` order), so two servers never apply a transition to the
  same stale row (:mod:`agentbolt.store.postgres.locking`);
* claims take queued rollouts with ``FOR UPDATE SKIP LOCKED``: concurrent claimers
  (in any process) skip each other's rows instead of waiting, and each rollout gets
  exactly one new attempt (:mod:`agentbolt.store.postgres.claims`, listed here with
  the other writes);
* the deadline checker takes expired attempts with ``SKIP LOCKED`` too, so it can run
  in every server at once without expiring an attempt twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentbolt.store import lifecycle
from agentbolt.store.errors import NotFoundError
from agentbolt.store.postgres.claims import claim_rollouts
from agentbolt.store.postgres.engine import PgTx
from agentbolt.store.postgres.locking import (
    PAIR,
    latest_version,
    lock_attempt,
    lock_pair,
    lock_rollout,
    release_worker,
)
from agentbolt.store.postgres.row_changes import Change, Statement, run_all, shape
from agentbolt.store.postgres.rows import (
    ROLLOUT_WIDTH,
    PgAttempt,
    PgRollout,
    fetchall,
    fetchone,
    rollout_columns,
    span_json,
)
from agentbolt.store.sql.changes import (
    RolloutTexts,
    apply_attempt_update,
    apply_new_spans,
    apply_rollout_metadata,
    is_cancel,
    new_rollout,
    note_finish,
    worker_values,
)
from agentbolt.store.sql.rows import (
    WORKER_COLUMNS,
    dumps,
    rollout_from_row,
    worker_from_row,
)
from agentbolt.store.sql.span_plan import SpanKey, plan_spans
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    ErrorInfo,
    ReportAndClaim,
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
    "report_and_claim",
    "update_attempt",
    "update_rollout",
    "update_worker",
    "WORKER_HEARTBEAT",
]

Conn = Any  # psycopg.AsyncConnection

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
    latest = await latest_version(conn) or 0
    new: dict[str, tuple[RolloutCreate, Rollout, RolloutTexts]] = {}
    order: list[str] = []
    for spec in specs:
        rid = spec.rollout_id or new_id("ro")
        order.append(rid)
        if rid in known or rid in new:
            continue
        r, texts = new_rollout(spec, rid, t, latest)
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
                [texts.input for _, (_, _, texts) in items],
                [texts.config for _, (_, _, texts) in items],
                [texts.metadata for _, (_, _, texts) in items],
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
    # each model was built for this call: only an id listed twice needs a copy (~50 µs each)
    out: list[Rollout] = []
    given_out: set[str] = set()
    for rid in order:
        out.append(known[rid].model_copy(deep=True) if rid in given_out else known[rid])
        given_out.add(rid)
    return out


async def update_rollout(
    conn: Conn, tx: PgTx, rollout_id: str, status: RolloutStatus | None, metadata: dict[str, Any] | None
) -> Rollout:
    lr = await lock_rollout(conn, rollout_id)
    r = lr.model
    before = r.status
    statements: list[Change] = []
    if is_cancel(r, status):
        la = await lock_attempt(conn, lr, r.latest_attempt_id) if r.latest_attempt_id is not None else None
        lifecycle.cancel_rollout(r, la.model if la else None, now())
        if la is not None:
            statements = la.update(r) + release_worker(la.model)
    apply_rollout_metadata(r, metadata)
    await run_all(conn, statements + lr.update(metadata_changed=bool(metadata)))
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
    lr, la = await lock_pair(conn, rollout_id, attempt_id)
    r, a = lr.model, la.model
    before = r.status
    apply_attempt_update(r, a, status, error, metadata)
    # attempt, rollout and worker: one statement
    await run_all(conn, la.update(r, metadata_changed=bool(metadata)) + lr.update() + release_worker(a))
    note_finish(tx, before, r)
    return a


async def report_and_claim(
    conn: Conn,
    tx: PgTx,
    rollout_id: str,
    attempt_id: str,
    status: AttemptStatus | None,
    error: ErrorInfo | None,
    metadata: dict[str, Any] | None,
    worker_id: str | None,
    limit: int,
    request_id: str | None,
) -> ReportAndClaim:
    """:func:`update_attempt`, then :func:`claim_rollouts`, in one transaction (a group
    runs several together: :mod:`agentbolt.store.postgres.together`)."""
    attempt = await update_attempt(conn, tx, rollout_id, attempt_id, status, error, metadata)
    return ReportAndClaim(attempt=attempt, claims=await claim_rollouts(conn, tx, worker_id, limit, request_id))


WORKER_HEARTBEAT = shape("workers", ("last_heartbeat_time",), ("worker_id",))


async def heartbeat(conn: Conn, tx: PgTx, rollout_id: str, attempt_id: str) -> Attempt:
    lr, la = await lock_pair(conn, rollout_id, attempt_id)
    r, a = lr.model, la.model
    t = now()
    lifecycle.touch_attempt(r, a, t)
    statements = la.update(r) + lr.update()
    if a.worker_id is not None:
        statements.append(Change(WORKER_HEARTBEAT, (t, a.worker_id)))
    await run_all(conn, statements)
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
        f"{PAIR} WHERE a.attempt_id = ANY(%b) ORDER BY r.seq, a.sequence_id FOR UPDATE",
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
    """The JSON of the batch's spans that are already stored, by key and span id. An
    attempt that has stored no span yet (its span counter is still 0: the first batch of
    every attempt) has none to look up; when no attempt of the batch has, nothing is read."""
    seqs, aseqs, ids = [], [], []
    for s in spans:
        lr, la = targets[(s.rollout_id, s.attempt_id)]
        if la.next_span_seq == 0:
            continue
        seqs.append(lr.seq)
        aseqs.append(la.model.sequence_id)
        ids.append(s.span_id)
    if not ids:
        return {}
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
    insert: Statement | None = None
    if plan.rows:  # the insert and the attempts' and rollouts' updates: one statement (run_all)
        cols: list[list[Any]] = [[] for _ in range(8)]
        for row in plan.rows:
            for i in range(6):
                cols[i].append(row[i])
            data, raw = span_json(row[6])
            cols[6].append(data)
            cols[7].append(raw)
        insert = (_INSERT_SPANS, tuple(cols))
    apply_new_spans(plan.new, targets)
    statements: list[Change] = []
    rollouts: dict[int, PgRollout] = {}
    for key, (lr, la) in targets.items():
        la.next_span_seq = plan.next_seq[key]
        statements.extend(la.update(lr.model))
        rollouts[lr.seq] = lr
    for lr in rollouts.values():
        statements.extend(lr.update())
    await run_all(conn, statements, insert)
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
        f"{PAIR} WHERE a.deadline IS NOT NULL AND a.deadline <= %s ORDER BY r.seq FOR UPDATE SKIP LOCKED",
        (t + _DEADLINE_SLACK,),
    )
    rollouts: dict[str, PgRollout] = {}
    statements: list[Change] = []
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
    await run_all(conn, statements)
    return expired
