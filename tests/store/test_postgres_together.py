"""PostgreSQL writes of one group that run as one call: the claims of a group are one
statement, attempt updates one lock and one write, span batches one call — with the
results each op would have had on its own, in arrival order. Needs PostgreSQL at
127.0.0.1:5432 (skipped otherwise)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentbolt.store.errors import NotFoundError
from agentbolt.types import AttemptStatus, ErrorInfo, RolloutConfig, RolloutCreate, RolloutStatus, Span, WorkerStatus
from tests.store.postgres_support import postgres_store, require_postgres

pytestmark = pytest.mark.usefixtures("_postgres")

A = AttemptStatus
R = RolloutStatus


@pytest.fixture
def _postgres() -> None:
    require_postgres()


class Counting:
    """A connection that counts the statements sent through it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements = 0

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.statements += 1
        return await self.conn.execute(*args, **kwargs)

    def cursor(self) -> Any:
        raise AssertionError("no statement of a joint op goes through executemany")


async def in_transaction(store: Any, body: Callable[[Counting, Any], Awaitable[Any]]) -> tuple[Any, int]:
    """``body(conn, tx)`` in one write transaction of ``store``; its value and statement count."""
    seen: list[int] = []

    async def op(conn: Any, tx: Any) -> Any:
        counting = Counting(conn)
        value = await body(counting, tx)
        seen.append(counting.statements)
        return value

    return await store._write(op), seen[-1]


async def deadline(store: Any, attempt_id: str) -> float:
    from agentbolt.store.postgres.rows import fetchone

    async def read(conn: Any, tx: Any) -> Any:
        return await fetchone(conn, "SELECT deadline FROM attempts WHERE attempt_id = %s", (attempt_id,))

    row = await store._read(read)
    return float(row[0])


async def test_the_claims_of_a_group_are_one_statement_and_take_the_queue_in_arrival_order() -> None:
    from agentbolt.store.postgres.claims import claim_together

    store = postgres_store()
    async with store:
        rollouts = await store.enqueue_rollouts(
            [RolloutCreate(input={"i": i}, config=RolloutConfig(timeout_seconds=60)) for i in range(6)]
        )
        ids = [r.rollout_id for r in rollouts]
        calls = [("w1", 2, "req-1"), ("w2", 1, None), ("w3", 5, None), (None, 1, None)]
        claims, statements = await in_transaction(store, lambda conn, tx: claim_together(conn, tx, calls))
        assert statements == 1
        assert [[c.rollout.rollout_id for c in cs] for cs in claims] == [ids[:2], ids[2:3], ids[3:6], []]
        for cs, (worker, _, _) in zip(claims, calls, strict=True):
            for c in cs:
                assert c.attempt.worker_id == worker and c.attempt.status == A.PREPARING
                assert await deadline(store, c.attempt.attempt_id) == c.attempt.start_time + 60
                stored = await store.get_rollout(c.rollout.rollout_id)
                assert stored == c.rollout and stored.status == R.PREPARING
                assert await store.get_attempt(c.rollout.rollout_id, c.attempt.attempt_id) == c.attempt
        w3 = await store.get_worker("w3")
        assert w3.status == WorkerStatus.BUSY and w3.current_rollout_id == ids[5]


async def test_a_claimer_that_shares_a_worker_or_a_request_id_with_an_earlier_one_runs_after_it() -> None:
    from agentbolt.store.postgres.claims import claim_together

    store = postgres_store()
    async with store:
        ids = [r.rollout_id for r in await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(4)])]
        calls = [("w1", 1, "req-1"), ("w1", 1, None), ("w2", 1, "req-1")]
        claims, statements = await in_transaction(store, lambda conn, tx: claim_together(conn, tx, calls))
        assert statements == 1 + 1 + 2  # the first alone, then w1 again, then req-1's replay (claim + replay)
        assert [c.rollout.rollout_id for c in claims[0]] == ids[:1]
        assert [c.rollout.rollout_id for c in claims[1]] == ids[1:2]
        assert claims[2] == claims[0], "the same request id: the same claims"
        worker = await store.get_worker("w1")
        assert worker.current_rollout_id == ids[1], "the later claim of w1 is its current one"


async def test_attempt_updates_of_a_group_apply_in_arrival_order_with_one_lock_and_one_write() -> None:
    from agentbolt.store.postgres import writes
    from agentbolt.store.postgres.together import BoundOp, update_attempts

    store = postgres_store()
    async with store:
        await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(3)])
        (c1, c2, c3) = await store.claim_rollouts("w", 3)
        retryable = ErrorInfo(type="flaky", message="try again", retryable=True)
        ops = [
            BoundOp(writes.update_attempt, (c1.rollout.rollout_id, c1.attempt.attempt_id, A.RUNNING, None, None)),
            BoundOp(writes.update_attempt, (c2.rollout.rollout_id, c2.attempt.attempt_id, A.FAILED, retryable, None)),
            BoundOp(writes.update_attempt, (c1.rollout.rollout_id, c1.attempt.attempt_id, A.SUCCEEDED, None, {"k": 1})),
            BoundOp(writes.update_attempt, (c3.rollout.rollout_id, c3.attempt.attempt_id, None, None, {"note": "x"})),
        ]
        results, statements = await in_transaction(store, lambda conn, tx: update_attempts(conn, tx, ops))
        assert statements == 2
        assert [a.status for a in results] == [A.RUNNING, A.FAILED, A.SUCCEEDED, A.PREPARING]
        assert results[0].metadata == {} and results[2].metadata == {"k": 1}, "each op sees the state after it"
        assert (await store.get_rollout(c1.rollout.rollout_id)).status == R.SUCCEEDED
        assert (await store.get_rollout(c2.rollout.rollout_id)).status == R.REQUEUING
        a2 = await store.get_attempt(c2.rollout.rollout_id, c2.attempt.attempt_id)
        assert a2.error == retryable and a2.end_time is not None
        assert (await store.get_attempt(c3.rollout.rollout_id, c3.attempt.attempt_id)).metadata == {"note": "x"}


async def test_concurrent_updates_and_span_batches_give_each_caller_its_own_answer() -> None:
    store = postgres_store()
    async with store:
        await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(20)])
        claims = await store.claim_rollouts("w", 20)
        spans = [
            store.add_spans([Span(rollout_id=c.rollout.rollout_id, attempt_id=c.attempt.attempt_id, name=f"s{k}")] * 2)
            for k, c in enumerate(claims)
        ]
        stored = await asyncio.gather(*spans)
        assert [[s.name for s in batch] for batch in stored] == [[f"s{k}", f"s{k}"] for k in range(20)]
        updates = [store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.SUCCEEDED) for c in claims]
        updates.append(store.update_attempt(claims[0].rollout.rollout_id, "no-such-attempt", status=A.SUCCEEDED))
        results = await asyncio.gather(*updates, return_exceptions=True)
        assert isinstance(results[-1], NotFoundError), "the unknown attempt fails alone"
        assert all(a.status == A.SUCCEEDED for a in results[:-1])  # type: ignore[union-attr]
        for c in claims:
            assert (await store.get_rollout(c.rollout.rollout_id)).status == R.SUCCEEDED
        assert (await store.get_worker("w")).status == WorkerStatus.IDLE


async def test_heartbeats_of_a_group_touch_each_attempt_with_one_lock_and_one_write() -> None:
    from agentbolt.store.postgres import writes
    from agentbolt.store.postgres.together import BoundOp, heartbeats

    store = postgres_store()
    async with store:
        await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(2)])
        (c1, c2) = await store.claim_rollouts("w", 2)
        pairs = [(c.rollout.rollout_id, c.attempt.attempt_id) for c in (c1, c2, c1)]
        ops = [BoundOp(writes.heartbeat, pair) for pair in pairs]
        results, statements = await in_transaction(store, lambda conn, tx: heartbeats(conn, tx, ops))
        assert statements == 2
        assert [a.status for a in results] == [A.RUNNING] * 3
        assert results[2].last_heartbeat_time >= results[0].last_heartbeat_time > c1.attempt.last_heartbeat_time
        for c in (c1, c2):
            assert (await store.get_rollout(c.rollout.rollout_id)).status == R.RUNNING
        stored = await store.get_attempt(c1.rollout.rollout_id, c1.attempt.attempt_id)
        assert stored.last_heartbeat_time == results[2].last_heartbeat_time
        assert (await store.get_worker("w")).last_heartbeat_time == results[2].last_heartbeat_time


async def test_reports_with_claims_of_a_group_are_one_lock_one_write_and_one_claim_statement() -> None:
    from agentbolt.store.postgres import writes
    from agentbolt.store.postgres.together import BoundOp, reports_and_claims

    store = postgres_store()
    async with store:
        ids = [r.rollout_id for r in await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(5)])]
        (c1, c2) = await store.claim_rollouts("w1", 1), await store.claim_rollouts("w2", 1)
        ops = [
            BoundOp(writes.report_and_claim,
                    (c1[0].rollout.rollout_id, c1[0].attempt.attempt_id, A.SUCCEEDED, None, None, "w1", 1, "r1")),
            BoundOp(writes.report_and_claim,
                    (c2[0].rollout.rollout_id, c2[0].attempt.attempt_id, A.SUCCEEDED, None, {"k": 2}, "w2", 2, None)),
        ]
        results, statements = await in_transaction(store, lambda conn, tx: reports_and_claims(conn, tx, ops))
        assert statements == 3
        assert [r.attempt.status for r in results] == [A.SUCCEEDED, A.SUCCEEDED]
        assert results[1].attempt.metadata == {"k": 2}
        assert [[c.rollout.rollout_id for c in r.claims] for r in results] == [ids[2:3], ids[3:5]]
        for rid in ids[:2]:
            assert (await store.get_rollout(rid)).status == R.SUCCEEDED
        w2 = await store.get_worker("w2")
        assert w2.status == WorkerStatus.BUSY and w2.current_rollout_id == ids[4]
        replay = await store.claim_rollouts("w1", 1, "r1")
        assert [c.attempt.attempt_id for c in replay] == [c.attempt.attempt_id for c in results[0].claims]
