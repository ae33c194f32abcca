"""Write ops of one group that run as ONE call: claims, attempt updates, span batches.

A write group (:mod:`agentbolt.store.postgres.group`) runs its ops in one transaction.
Ops that carry a ``together`` function — :class:`BoundOp` finds it in :data:`TOGETHER`
— run as one call of it, at the place of the first of them:

* **claims**: one statement for all (:func:`~agentbolt.store.postgres.claims.claim_together`);
* **attempt updates** and **heartbeats** (each kind on its own): one ``SELECT ... FOR
  UPDATE`` of every (rollout, attempt) pair, the lifecycle applied op by op in arrival
  order, one statement writing every changed attempt, rollout and worker
  (:func:`update_attempts`, :func:`heartbeats`);
* **span batches**: one ``add_spans`` call over all their spans, sliced back per op (as
  ``/v1/batch`` already does for the span ops of one request);
* **reports with claims** (``report_and_claim``): every report as the attempt updates
  above, then every claim in one claim statement (:func:`reports_and_claims`).

Every op of a group waits for the same COMMIT, so they are concurrent calls and any
order among them is one their callers may see; within each kind, arrival order is kept.
If the joint call fails (an unknown attempt, a forbidden transition), the group runs
again with a savepoint per op, each op on its own: only the bad one fails, with its own
error, as if they had never been joined.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentbolt.store import lifecycle
from agentbolt.store.errors import NotFoundError
from agentbolt.store.postgres import writes
from agentbolt.store.postgres.claims import claim_together
from agentbolt.store.postgres.engine import PgTx
from agentbolt.store.postgres.locking import PAIR, release_worker
from agentbolt.store.postgres.row_changes import Change, run_all
from agentbolt.store.postgres.rows import ROLLOUT_WIDTH, PgAttempt, PgRollout, fetchall
from agentbolt.store.postgres.writes import WORKER_HEARTBEAT
from agentbolt.store.sql.changes import apply_attempt_update, note_finish
from agentbolt.types import Attempt, ReportAndClaim, Span, now

__all__ = ["TOGETHER", "BoundOp", "heartbeats", "reports_and_claims", "update_attempts"]

Conn = Any  # psycopg.AsyncConnection
Together = Callable[[Conn, PgTx, Sequence["BoundOp"]], Awaitable[list[Any]]]


class BoundOp:
    """A write op ``fn(conn, tx, *args)`` that a group may run together with others of
    its kind (``together``: None when it always runs alone)."""

    __slots__ = ("args", "fn", "together")

    def __init__(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.together: Together | None = TOGETHER.get(fn)

    def __call__(self, conn: Conn, tx: PgTx) -> Awaitable[Any]:
        return self.fn(conn, tx, *self.args)


async def _claims(conn: Conn, tx: PgTx, ops: Sequence[BoundOp]) -> list[Any]:
    # args: worker_id, limit, request_id (SqlStore.claim_rollouts)
    return await claim_together(conn, tx, [(op.args[0], op.args[1], op.args[2]) for op in ops])


async def _spans(conn: Conn, tx: PgTx, ops: Sequence[BoundOp]) -> list[Any]:
    # args: the batch (SqlStore.add_spans); one call, its answer sliced back per op
    batches: list[Sequence[Span]] = [op.args[0] for op in ops]
    stored = await writes.add_spans(conn, tx, [s for batch in batches for s in batch])
    out: list[Any] = []
    start = 0
    for batch in batches:
        out.append(stored[start : start + len(batch)])
        start += len(batch)
    return out


Pair = tuple[str, str]
"""``(rollout_id, attempt_id)``."""


async def _lock_pairs(conn: Conn, pairs: list[Pair]) -> dict[Pair, tuple[PgRollout, PgAttempt]]:
    """Every listed attempt with its rollout (one model per rollout), locked by one
    statement in rollout order, like every other write. A pair not found: NotFoundError
    (the group then runs each op alone, which says which id is unknown)."""
    rows = await fetchall(
        conn,
        f"{PAIR} WHERE a.attempt_id = ANY(%b) ORDER BY r.seq, a.sequence_id FOR UPDATE",
        (list(dict.fromkeys(aid for _, aid in pairs)),),
    )
    rollouts: dict[int, PgRollout] = {}
    loaded: dict[Pair, tuple[PgRollout, PgAttempt]] = {}
    for row in rows:
        lr = rollouts.get(row[0])
        if lr is None:
            lr = rollouts[row[0]] = PgRollout.from_row(row[:ROLLOUT_WIDTH], light=True)
        la = PgAttempt.from_row(row[ROLLOUT_WIDTH:], lr.model)
        loaded[(lr.model.rollout_id, la.model.attempt_id)] = (lr, la)
    for rid, aid in pairs:
        if (rid, aid) not in loaded:
            raise NotFoundError(f"attempt {aid!r} of rollout {rid!r} not found")
    return loaded


def _written_back(loaded: dict[Pair, tuple[PgRollout, PgAttempt]], metadata_changed: set[Pair]) -> list[Change]:
    """The changes of every loaded attempt and rollout (each row once)."""
    changes: list[Change] = []
    rollouts: dict[int, PgRollout] = {}
    for pair, (lr, la) in loaded.items():
        changes += la.update(lr.model, metadata_changed=pair in metadata_changed)
        rollouts[lr.seq] = lr
    for lr in rollouts.values():
        changes += lr.update()
    return changes


def _answer(a: Attempt, pair: Pair, pairs: list[Pair]) -> Attempt:
    """An op's answer: the attempt as it left it (a copy when a later op changes it too)."""
    return a.model_copy(deep=True) if pairs.count(pair) > 1 else a


async def update_attempts(conn: Conn, tx: PgTx, ops: Sequence[BoundOp]) -> list[Any]:
    """Several ``update_attempt`` calls (args: rollout id, attempt id, status, error,
    metadata — and maybe more, unread), applied in order on rows locked by one
    statement, written by one."""
    pairs: list[Pair] = [(op.args[0], op.args[1]) for op in ops]
    loaded = await _lock_pairs(conn, pairs)
    metadata_changed: set[Pair] = set()
    out: list[Attempt] = []
    for op, pair in zip(ops, pairs, strict=True):
        lr, la = loaded[pair]
        r, a = lr.model, la.model
        before = r.status
        status, error, metadata = op.args[2:5]
        apply_attempt_update(r, a, status, error, metadata)
        if metadata:
            metadata_changed.add(pair)
        note_finish(tx, before, r)
        out.append(_answer(a, pair, pairs))
    changes = _written_back(loaded, metadata_changed)
    for _, la in loaded.values():
        changes += release_worker(la.model)
    await run_all(conn, changes)
    return out


async def heartbeats(conn: Conn, tx: PgTx, ops: Sequence[BoundOp]) -> list[Any]:
    """Several ``heartbeat`` calls (args: rollout id, attempt id), as :func:`update_attempts`."""
    pairs: list[Pair] = [(op.args[0], op.args[1]) for op in ops]
    loaded = await _lock_pairs(conn, pairs)
    workers: dict[str, float] = {}
    out: list[Attempt] = []
    for pair in pairs:
        lr, la = loaded[pair]
        t = now()
        lifecycle.touch_attempt(lr.model, la.model, t)
        if la.model.worker_id is not None:
            workers[la.model.worker_id] = t
        out.append(_answer(la.model, pair, pairs))
    changes = _written_back(loaded, set())
    changes += [Change(WORKER_HEARTBEAT, (t, worker)) for worker, t in workers.items()]
    await run_all(conn, changes)
    return out


async def reports_and_claims(conn: Conn, tx: PgTx, ops: Sequence[BoundOp]) -> list[Any]:
    """Several ``report_and_claim`` calls (args: those of ``update_attempt``, then worker
    id, limit, request id): every report as :func:`update_attempts`, then every claim in
    one statement (:func:`~agentbolt.store.postgres.claims.claim_together`), claimers in
    arrival order."""
    attempts = await update_attempts(conn, tx, ops)
    claims = await claim_together(conn, tx, [(op.args[5], op.args[6], op.args[7]) for op in ops])
    return [ReportAndClaim(attempt=a, claims=c) for a, c in zip(attempts, claims, strict=True)]


TOGETHER: dict[Any, Together] = {
    writes.claim_rollouts: _claims,
    writes.update_attempt: update_attempts,
    writes.report_and_claim: reports_and_claims,
    writes.heartbeat: heartbeats,
    writes.add_spans: _spans,
}
"""The write ops a group runs together, and the function that runs each kind."""
