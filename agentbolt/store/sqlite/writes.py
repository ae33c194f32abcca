"""The write operations of :class:`~agentbolt.store.sqlite.SqliteStore`.

Each function runs inside the writer's transaction (see
:class:`~agentbolt.store.sqlite.engine.GroupCommitWriter`): it loads the rows it
touches, rebuilds the models, applies the pure state machine of
:mod:`agentbolt.store.lifecycle` — the same calls as :class:`MemoryStore` — and writes
back only the columns that changed. Raising rolls back this op alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from agentbolt.store import lifecycle
from agentbolt.store.errors import NotFoundError
from agentbolt.store.sql.changes import (
    apply_attempt_update,
    apply_new_spans,
    apply_rollout_metadata,
    is_cancel,
    new_rollout,
    note_finish,
    worker_values,
)
from agentbolt.store.sql.span_plan import plan_spans as _plan_spans
from agentbolt.store.sqlite.engine import WriteTx
from agentbolt.store.sqlite.rows import (
    ATTEMPT_COLUMNS,
    LIGHT_ROLLOUT_COLUMNS,
    ROLLOUT_COLUMNS,
    WORKER_COLUMNS,
    LoadedAttempt,
    LoadedRollout,
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
    "check_deadlines",
    "claim_rollouts",
    "enqueue_rollouts",
    "heartbeat",
    "report_and_claim",
    "update_attempt",
    "update_rollout",
    "update_worker",
]


# ---------------------------------------------------------------------------- loading
def _load_rollout(conn: sqlite3.Connection, rollout_id: str, *, light: bool = False) -> LoadedRollout:
    """The rollout, for changing it; ``light`` skips its input and metadata."""
    columns = LIGHT_ROLLOUT_COLUMNS if light else ROLLOUT_COLUMNS
    row = conn.execute(f"SELECT {columns} FROM rollouts WHERE rollout_id = ?", (rollout_id,)).fetchone()
    if row is None:
        raise NotFoundError(f"rollout {rollout_id!r} not found")
    return LoadedRollout.from_row(row, light=light)


def _attempt_row(conn: sqlite3.Connection, rollout_id: str, attempt_id: str) -> tuple[Any, ...]:
    row = conn.execute(f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE attempt_id = ?", (attempt_id,)).fetchone()
    if row is None or row[2] != rollout_id:
        raise NotFoundError(f"attempt {attempt_id!r} of rollout {rollout_id!r} not found")
    return row


def _load_pair(conn: sqlite3.Connection, rollout_id: str, attempt_id: str) -> tuple[LoadedRollout, LoadedAttempt]:
    lr = _load_rollout(conn, rollout_id, light=True)
    return lr, LoadedAttempt.from_row(_attempt_row(conn, rollout_id, attempt_id), lr.model)


def _latest_version(conn: sqlite3.Connection, tx: WriteTx) -> int | None:
    # other processes cannot publish while this transaction holds the write lock
    if "latest_version" not in tx.memo:
        tx.memo["latest_version"] = conn.execute("SELECT max(version) FROM resources").fetchone()[0]
    return tx.memo["latest_version"]


def _release_worker(conn: sqlite3.Connection, attempt: Attempt) -> None:
    """A worker whose current attempt finished is idle again."""
    if attempt.worker_id is not None and not attempt.status.is_active:
        conn.execute(
            "UPDATE workers SET status = 'idle', current_rollout_id = NULL, current_attempt_id = NULL "
            "WHERE worker_id = ? AND current_attempt_id = ?",
            (attempt.worker_id, attempt.attempt_id),
        )


# ---------------------------------------------------------------------------- rollouts
_INSERT_ROLLOUT = (
    "INSERT INTO rollouts (rollout_id, status, mode, created_at, updated_at, attempt_count, "
    "resources_version, input, config, metadata) VALUES (?, 'queuing', ?, ?, ?, 0, ?, ?, ?, ?)"
)


def enqueue_rollouts(conn: sqlite3.Connection, tx: WriteTx, specs: Sequence[RolloutCreate]) -> list[Rollout]:
    t = now()
    given = [s.rollout_id for s in specs if s.rollout_id is not None]
    known: dict[str, Rollout] = {}
    if given:
        rows = conn.execute(
            f"SELECT {ROLLOUT_COLUMNS} FROM rollouts WHERE rollout_id IN (SELECT value FROM json_each(?))",
            (orjson.dumps(given).decode(),),
        )
        known = {row[1]: rollout_from_row(row) for row in rows}
    latest = _latest_version(conn, tx) or 0
    out: list[Rollout] = []
    for spec in specs:
        rid = spec.rollout_id or new_id("ro")
        existing = known.get(rid)
        if existing is not None:
            out.append(existing.model_copy(deep=True))
            continue
        r, texts = new_rollout(spec, rid, t, latest)
        conn.execute(_INSERT_ROLLOUT, (rid, spec.mode.value, t, t, spec.resources_version, *texts))
        known[rid] = r
        out.append(r)
    return out


_INSERT_ATTEMPT = (
    "INSERT INTO attempts (attempt_id, rollout_id, rollout_seq, sequence_id, worker_id, status, start_time, "
    "last_heartbeat_time, resources_version, metadata, next_span_seq, deadline, claim_request_id) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '{}', 0, ?, ?)"
)

_UPSERT_CLAIMING_WORKER = (
    "INSERT INTO workers (worker_id, status, created_at, last_heartbeat_time, current_rollout_id, "
    "current_attempt_id, metadata) VALUES (?1, ?2, ?3, ?3, ?4, ?5, '{}') "
    "ON CONFLICT (worker_id) DO UPDATE SET last_heartbeat_time = excluded.last_heartbeat_time, "
    "status = CASE WHEN ?6 THEN excluded.status ELSE workers.status END, "
    "current_rollout_id = CASE WHEN ?6 THEN excluded.current_rollout_id ELSE workers.current_rollout_id END, "
    "current_attempt_id = CASE WHEN ?6 THEN excluded.current_attempt_id ELSE workers.current_attempt_id END"
)


def _replay_claims(conn: sqlite3.Connection, request_id: str) -> list[Claim]:
    rows = conn.execute(
        f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE claim_request_id = ? ORDER BY rowid", (request_id,)
    ).fetchall()
    return [Claim(rollout=_load_rollout(conn, row[2]).model, attempt=attempt_from_row(row)) for row in rows]


def claim_rollouts(
    conn: sqlite3.Connection, tx: WriteTx, worker_id: str | None, limit: int, request_id: str | None
) -> list[Claim]:
    if (
        request_id is not None
        and conn.execute("SELECT 1 FROM claim_requests WHERE request_id = ?", (request_id,)).fetchone()
    ):
        return _replay_claims(conn, request_id)
    t = now()
    latest = _latest_version(conn, tx)
    rows = conn.execute(
        f"SELECT {ROLLOUT_COLUMNS} FROM rollouts INDEXED BY rollouts_queue "
        "WHERE status IN ('queuing', 'requeuing') ORDER BY seq LIMIT ?",
        (limit,),
    ).fetchall()
    claims: list[Claim] = []
    for row in rows:
        lr = LoadedRollout.from_row(row)
        r = lr.model
        att = lifecycle.start_attempt(r, worker_id, t, latest)
        conn.execute(
            _INSERT_ATTEMPT,
            (
                att.attempt_id,
                r.rollout_id,
                lr.seq,
                att.sequence_id,
                worker_id,
                att.status.value,
                att.start_time,
                att.last_heartbeat_time,
                att.resources_version,
                attempt_deadline(r, att),
                request_id,
            ),
        )
        lr.save(conn)
        claims.append(Claim(rollout=r, attempt=att))
    if worker_id is not None:
        last = claims[-1] if claims else None
        conn.execute(
            _UPSERT_CLAIMING_WORKER,
            (
                worker_id,
                WorkerStatus.BUSY.value if last else WorkerStatus.IDLE.value,
                t,
                last.rollout.rollout_id if last else None,
                last.attempt.attempt_id if last else None,
                1 if last else 0,
            ),
        )
    if request_id is not None:
        conn.execute("INSERT INTO claim_requests (request_id, created_at) VALUES (?, ?)", (request_id, t))
    return claims


def update_rollout(
    conn: sqlite3.Connection,
    tx: WriteTx,
    rollout_id: str,
    status: RolloutStatus | None,
    metadata: dict[str, Any] | None,
) -> Rollout:
    lr = _load_rollout(conn, rollout_id)
    r = lr.model
    before = r.status
    if is_cancel(r, status):
        la = None
        if r.latest_attempt_id is not None:
            la = LoadedAttempt.from_row(_attempt_row(conn, rollout_id, r.latest_attempt_id), r)
        lifecycle.cancel_rollout(r, la.model if la else None, now())
        if la is not None:
            la.save(conn, r)
    apply_rollout_metadata(r, metadata)
    lr.save(conn, metadata_changed=bool(metadata))
    note_finish(tx, before, r)
    return r


# ---------------------------------------------------------------------------- attempts
def update_attempt(
    conn: sqlite3.Connection,
    tx: WriteTx,
    rollout_id: str,
    attempt_id: str,
    status: AttemptStatus | None,
    error: ErrorInfo | None,
    metadata: dict[str, Any] | None,
) -> Attempt:
    lr, la = _load_pair(conn, rollout_id, attempt_id)
    r, a = lr.model, la.model
    before = r.status
    apply_attempt_update(r, a, status, error, metadata)
    la.save(conn, r, metadata_changed=bool(metadata))
    lr.save(conn)
    _release_worker(conn, a)
    note_finish(tx, before, r)
    return a


def report_and_claim(
    conn: sqlite3.Connection,
    tx: WriteTx,
    rollout_id: str,
    attempt_id: str,
    status: AttemptStatus | None,
    error: ErrorInfo | None,
    metadata: dict[str, Any] | None,
    worker_id: str | None,
    limit: int,
    request_id: str | None,
) -> ReportAndClaim:
    """:func:`update_attempt`, then :func:`claim_rollouts`, in one transaction."""
    attempt = update_attempt(conn, tx, rollout_id, attempt_id, status, error, metadata)
    return ReportAndClaim(attempt=attempt, claims=claim_rollouts(conn, tx, worker_id, limit, request_id))


def heartbeat(conn: sqlite3.Connection, tx: WriteTx, rollout_id: str, attempt_id: str) -> Attempt:
    lr, la = _load_pair(conn, rollout_id, attempt_id)
    r, a = lr.model, la.model
    t = now()
    lifecycle.touch_attempt(r, a, t)
    la.save(conn, r)
    lr.save(conn)
    if a.worker_id is not None:
        conn.execute("UPDATE workers SET last_heartbeat_time = ? WHERE worker_id = ?", (t, a.worker_id))
    return a


# ---------------------------------------------------------------------------- spans
_INSERT_SPANS = (
    "INSERT OR IGNORE INTO spans (rollout_seq, attempt_seq, span_id, sequence_id, name, start_time, data) VALUES "
)
_MAX_ROWS = 128  # 896 parameters: under the 999 of SQLite builds before 3.32


def _insert_spans(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """Insert span rows a power-of-two chunk per statement (at most ~8 statement texts,
    each prepared once), not one statement per row.

    Python's ``sqlite3`` lets go of the GIL around every statement it runs; taking it back
    while the event loop keeps it busy (a gateway under load) costs the writer up to the
    interpreter's switch interval, 5 ms. With ``executemany`` that was per row: a batch of
    256 spans took 1.3 s, the writer fell ever further behind and the calls it had not
    stored yet made every full garbage collection longer."""
    i = 0
    while i < len(rows):
        n = min(_MAX_ROWS, 1 << ((len(rows) - i).bit_length() - 1))
        conn.execute(_INSERT_SPANS + ", ".join(("(?, ?, ?, ?, ?, ?, ?)",) * n), [v for r in rows[i : i + n] for v in r])
        i += n


_SpanKey = tuple[str, str]
_Targets = dict[_SpanKey, tuple[LoadedRollout, LoadedAttempt]]


def _stored_spans(conn: sqlite3.Connection, spans: Sequence[Span], targets: _Targets) -> dict[_SpanKey, dict[str, str]]:
    ids: dict[_SpanKey, list[str]] = {}
    for s in spans:
        ids.setdefault((s.rollout_id, s.attempt_id), []).append(s.span_id)
    stored: dict[_SpanKey, dict[str, str]] = {}
    for key, span_ids in ids.items():
        lr, la = targets[key]
        rows = conn.execute(
            "SELECT span_id, data FROM spans WHERE rollout_seq = ? AND attempt_seq = ? "
            "AND span_id IN (SELECT value FROM json_each(?))",
            (lr.seq, la.model.sequence_id, orjson.dumps(span_ids).decode()),
        )
        stored[key] = dict(rows.fetchall())
    return stored


def add_spans(conn: sqlite3.Connection, tx: WriteTx, spans: Sequence[Span]) -> list[Span]:
    # load every target first: one unknown attempt rejects the batch
    rollouts: dict[str, LoadedRollout] = {}
    targets: _Targets = {}
    for s in spans:
        key = (s.rollout_id, s.attempt_id)
        if key in targets:
            continue
        row = _attempt_row(conn, s.rollout_id, s.attempt_id)
        lr = rollouts.get(s.rollout_id)
        if lr is None:
            lr = rollouts[s.rollout_id] = _load_rollout(conn, s.rollout_id, light=True)
        targets[key] = (lr, LoadedAttempt.from_row(row, lr.model))
    # Optimistic: a re-sent span is rare, so insert as if none were stored and let the
    # primary key ignore duplicates; if it did, undo and plan again knowing them
    # (a re-sent span is returned as stored and takes no new sequence id).
    plan = _plan_spans(spans, targets, {})
    conn.execute("SAVEPOINT spans")
    changes = conn.total_changes
    _insert_spans(conn, plan.rows)
    if conn.total_changes - changes != len(plan.rows):
        conn.execute("ROLLBACK TO spans")
        plan = _plan_spans(spans, targets, _stored_spans(conn, spans, targets))
        _insert_spans(conn, plan.rows)
    conn.execute("RELEASE spans")
    apply_new_spans(plan.new, targets)
    for key, (lr, la) in targets.items():
        la.next_span_seq = plan.next_seq[key]
        la.save(conn, lr.model)
    for lr in rollouts.values():
        lr.save(conn)
    return plan.out


# ---------------------------------------------------------------------------- resources & workers
def add_resources(conn: sqlite3.Connection, tx: WriteTx, bundle: Resources) -> Resources:
    """Store ``bundle`` (already validated) as the next version."""
    version = conn.execute("SELECT coalesce(max(version), 0) + 1 FROM resources").fetchone()[0]
    bundle = bundle.model_copy(update={"version": version})
    conn.execute(
        "INSERT INTO resources (version, created_at, resources, metadata) VALUES (?, ?, ?, ?)",
        (version, bundle.created_at, dumps(bundle.resources), dumps(bundle.metadata)),
    )
    tx.memo.pop("latest_version", None)  # recomputed (this op may still be rolled back)
    return bundle


def update_worker(
    conn: sqlite3.Connection,
    tx: WriteTx,
    worker_id: str,
    status: WorkerStatus | None,
    metadata: dict[str, Any] | None,
) -> Worker:
    t = now()
    row = conn.execute(f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = ?", (worker_id,)).fetchone()
    if row is not None:
        w = worker_from_row(row)
    else:
        w = Worker(worker_id=worker_id, created_at=t, last_heartbeat_time=t)
    lifecycle.refresh_worker(w, t, status, metadata)
    conn.execute(
        f"INSERT OR REPLACE INTO workers ({WORKER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        worker_values(w),
    )
    return w


# ---------------------------------------------------------------------------- deadlines
_DEADLINE_SLACK = 1e-6  # the index prefilters; lifecycle.expired_status decides exactly


def check_deadlines(conn: sqlite3.Connection, tx: WriteTx) -> int:
    t = now()
    rows = conn.execute(
        f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE deadline IS NOT NULL AND deadline <= ?",
        (t + _DEADLINE_SLACK,),
    ).fetchall()
    rollouts: dict[str, LoadedRollout] = {}
    expired = 0
    for row in rows:
        lr = rollouts.get(row[2])
        if lr is None:
            lr = rollouts[row[2]] = _load_rollout(conn, row[2], light=True)
        r = lr.model
        la = LoadedAttempt.from_row(row, r)
        before = r.status
        if lifecycle.expire_attempt(r, la.model, t):
            expired += 1
        la.save(conn, r)
        lr.save(conn)
        note_finish(tx, before, r)
    return expired
