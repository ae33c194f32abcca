"""What PostgresStore adds to the conformance suite: versioned migrations, several store
instances ("servers") sharing one database, LISTEN/NOTIFY waits, surviving killed
connections, and clear errors. Needs PostgreSQL at 127.0.0.1:5432 (skipped otherwise)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentbolt.store import open_store
from agentbolt.store.errors import InvalidRequestError, StoreUnavailableError
from agentbolt.types import (
    AttemptStatus,
    RolloutConfig,
    RolloutCreate,
    RolloutStatus,
    Span,
)
from tests.store.postgres_support import (
    POSTGRES_URL,
    new_schema,
    postgres_store,
    require_postgres,
)

pytestmark = pytest.mark.usefixtures("_postgres")

A = AttemptStatus
R = RolloutStatus


@pytest.fixture
def _postgres() -> None:
    require_postgres()


@contextlib.asynccontextmanager
async def servers(n: int, schema: str | None = None, *, drop: bool = True, **kwargs: Any) -> AsyncIterator[list[Any]]:
    """``n`` started PostgresStore instances on one schema, like ``n`` server processes
    sharing the database (each has its own pool and listener). With ``drop``, the schema
    is dropped when the last one closes."""
    schema = schema or new_schema()
    stores = [postgres_store(schema=schema, drop_schema_on_close=drop and i == 0, **kwargs) for i in range(n)]
    try:
        await asyncio.gather(*(s.start() for s in stores))
        yield stores
    finally:
        for s in reversed(stores):
            await s.close()


async def sql(query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of the test's own (autocommit)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        cur = await conn.execute(query, params or None)
        return await cur.fetchall() if cur.description else []


# ---------------------------------------------------------------------------- migrations
async def test_a_new_schema_is_migrated_once_and_every_step_is_recorded() -> None:
    from agentbolt.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION

    schema = new_schema()
    async with servers(1, schema) as (first,):
        assert first.migrations_applied == SCHEMA_VERSION
        rows = await sql(f"SELECT version, description FROM {schema}.agentbolt_migrations ORDER BY version")
        assert rows == [(i, m.description) for i, m in enumerate(MIGRATIONS, start=1)]
        async with servers(1, schema, drop=False) as (second,):
            assert second.migrations_applied == 0


async def test_servers_starting_together_on_a_new_schema_migrate_it_exactly_once() -> None:
    from agentbolt.store.postgres.schema import SCHEMA_VERSION

    async with servers(4) as stores:
        assert sorted(s.migrations_applied for s in stores) == [0, 0, 0, SCHEMA_VERSION]
        # they share one store: what one enqueues, another sees
        r = await stores[0].enqueue_rollout({"q": 1})
        assert (await stores[3].get_rollout(r.rollout_id)).input == {"q": 1}


async def test_a_schema_from_a_newer_agentbolt_is_refused_with_a_clear_message() -> None:
    from agentbolt.store.postgres.schema import SCHEMA_VERSION, SchemaVersionError

    schema = new_schema()
    async with servers(1, schema):
        await sql(
            f"INSERT INTO {schema}.agentbolt_migrations (version, description) VALUES (%s, 'future')",
            SCHEMA_VERSION + 1,
        )
        newer = postgres_store(schema=schema, drop_schema_on_close=False)
        with pytest.raises(SchemaVersionError, match="newer agentbolt; upgrade agentbolt"):
            await newer.start()


async def test_the_dashboard_queries_have_their_indexes() -> None:
    schema = new_schema()
    async with servers(1, schema):
        names = {row[0] for row in await sql("SELECT indexname FROM pg_indexes WHERE schemaname = %s", schema)}
    assert {"rollouts_queue", "rollouts_status_created", "rollouts_mode_created", "rollouts_created"} <= names
    assert {"attempts_deadline", "spans_order"} <= names
    trgm = await sql("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")
    assert ("rollouts_search" in names) == bool(trgm), "the search index exists exactly when pg_trgm does"


# ---------------------------------------------------------------------------- several servers
async def test_claimers_on_four_servers_sharing_one_database_claim_each_rollout_exactly_once() -> None:
    async with servers(4, pool_max=4) as stores:
        ids = [r.rollout_id for r in await stores[0].enqueue_rollouts([RolloutCreate(input=i) for i in range(120)])]

        async def claimer(store: Any, name: str) -> list[str]:
            taken: list[str] = []
            while claims := await store.claim_rollouts(name, limit=3):
                taken.extend(c.rollout.rollout_id for c in claims)
            return taken

        results = await asyncio.gather(*(claimer(s, f"s{i}-w{j}") for i, s in enumerate(stores) for j in range(4)))

        claimed = Counter(rid for taken in results for rid in taken)
        assert sorted(claimed) == sorted(ids)
        assert max(claimed.values()) == 1, "no rollout was handed out twice"
        assert sum(1 for taken in results if taken) > 4, "the claims really were spread over the claimers"
        stats = await stores[1].stats()
        assert stats.total_attempts == 120 and stats.queue_depth == 0


async def test_a_claim_retried_on_another_server_gets_the_same_claims() -> None:
    # a runner's claim times out on server A and its retry (same request id) lands on B
    async with servers(2) as (a, b):
        await a.enqueue_rollouts([RolloutCreate(input=i) for i in range(6)])

        first, second, third = await asyncio.gather(
            a.claim_rollouts("w", limit=2, request_id="req-1"),
            b.claim_rollouts("w", limit=2, request_id="req-1"),
            b.claim_rollouts("w", limit=2, request_id="req-1"),
        )

        ids = [c.attempt.attempt_id for c in first]
        assert len(ids) == 2
        assert [c.attempt.attempt_id for c in second] == ids == [c.attempt.attempt_id for c in third]
        assert (await b.stats()).total_attempts == 2, "the retries created no attempt"


async def test_deadline_checks_running_in_every_server_expire_each_attempt_once() -> None:
    async with servers(3) as stores:
        config = RolloutConfig(unresponsive_seconds=0.2, max_attempts=2)
        await stores[0].enqueue_rollouts([RolloutCreate(input=i, config=config) for i in range(30)])
        claims = await stores[0].claim_rollouts("w", limit=30)
        await asyncio.sleep(0.3)

        expired = await asyncio.gather(*(s.check_deadlines() for s in stores for _ in range(3)))

        assert sum(expired) == 30
        for c in claims:
            (attempt,) = await stores[1].query_attempts(c.rollout.rollout_id)
            assert attempt.status == A.UNRESPONSIVE
            assert (await stores[2].get_rollout(c.rollout.rollout_id)).status == R.REQUEUING
        assert (await stores[0].stats()).queue_depth == 30


# ---------------------------------------------------------------------------- waits
async def test_a_waiter_on_one_server_wakes_by_notify_when_another_server_finishes_the_rollout() -> None:
    # the waiter's own polling is turned far down (60 s): only NOTIFY can wake it in time
    async with servers(2, deadline_check_interval=60.0, safety_poll=60.0) as (waiter, worker):
        r = await worker.enqueue_rollout("x")
        claim = await worker.claim_rollout("w")
        assert claim is not None
        finished_at: list[float] = []

        async def finish_later() -> None:
            await asyncio.sleep(0.4)
            await worker.update_attempt(r.rollout_id, claim.attempt.attempt_id, status=A.SUCCEEDED)
            finished_at.append(time.monotonic())

        finisher = asyncio.create_task(finish_later())
        started = time.monotonic()
        (done,) = await waiter.wait_for_rollouts([r.rollout_id], timeout=30)
        woke_at = time.monotonic()
        await finisher

        assert done.status == R.SUCCEEDED
        assert woke_at - finished_at[0] < 1.0, "woken by the notification, not by a poll"
        assert woke_at - started < 5.0


# ---------------------------------------------------------------------------- faults
async def test_the_store_recovers_when_postgres_kills_all_its_connections() -> None:
    async with servers(1, safety_poll=0.2) as (store,):
        r = await store.enqueue_rollout("before")
        await store.get_rollout(r.rollout_id)  # the pool has a connection now
        engine = store._engine
        connects = engine.listener_connects

        killed = await sql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            engine.application_name,
        )
        assert killed[0][0] >= 2, "the pool's connection and the listener were killed"

        assert (await store.get_rollout(r.rollout_id)).input == "before"  # a read on a fresh connection
        again = await store.enqueue_rollout("after")  # and a write
        claim = await store.claim_rollout("w")
        assert claim is not None and claim.rollout.rollout_id == r.rollout_id
        deadline = time.monotonic() + 10
        while engine.listener_connects == connects and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert engine.listener_connects > connects, "the listener reconnected"
        await store.update_attempt(r.rollout_id, claim.attempt.attempt_id, status=A.SUCCEEDED)
        assert [x.rollout_id for x in await store.wait_for_rollouts([r.rollout_id], timeout=5)] == [r.rollout_id]
        assert (await store.get_rollout(again.rollout_id)).status == R.QUEUING


async def test_an_unreachable_server_is_a_clear_unavailable_error() -> None:
    from agentbolt.store.postgres import PostgresStore

    store = PostgresStore("postgresql://127.0.0.1:1/test", connect_timeout=2)
    with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:1 \(database test\).*refused.*start PostgreSQL"):
        await store.start()


@pytest.mark.parametrize(
    ("url", "kwargs", "message"),
    [
        ("postgresql://h/db?pool_max=zero", {}, "pool_max must be an integer"),
        ("postgresql://h/db?pool_min=5&pool_max=2", {}, "must be at least pool_min"),
        ("postgresql://h/db", {"schema": "Robert'); DROP TABLE"}, "invalid PostgreSQL schema name"),
        ("postgresql://h:port/db", {}, "invalid PostgreSQL URL"),
    ],
)
def test_bad_settings_are_refused_before_connecting(url: str, kwargs: dict[str, Any], message: str) -> None:
    from agentbolt.store.postgres import PostgresStore

    with pytest.raises(InvalidRequestError, match=message):
        PostgresStore(url, **kwargs)


def test_open_store_builds_a_postgres_store_from_its_url_options() -> None:
    from agentbolt.store.postgres import PostgresStore

    store = open_store("postgres://user:secret@db.example:6543/runs?schema=exp_1&pool_max=20&sslmode=require")

    assert isinstance(store, PostgresStore)
    assert (store.schema, store.pool_min, store.pool_max) == ("exp_1", 1, 20)
    assert "secret" not in repr(store)


# ---------------------------------------------------------------------------- spans
async def test_spans_are_jsonb_except_ones_with_a_nul_character_which_are_kept_intact() -> None:
    schema = new_schema()
    async with servers(1, schema) as (store,):
        await store.enqueue_rollout("x")
        claim = await store.claim_rollout("w")
        assert claim is not None
        ids = {"rollout_id": claim.rollout.rollout_id, "attempt_id": claim.attempt.attempt_id}
        plain = Span(**ids, span_id="plain", name="llm", attributes={"prompt": "hi", "n": [1, 2.5, None]})
        nul = Span(**ids, span_id="nul", name="llm", attributes={"completion": "a\x00b", "\x00key": 1})
        await store.add_spans([plain, nul])

        got = {s.span_id: s for s in await store.get_spans(claim.rollout.rollout_id)}
        assert got["plain"].attributes == plain.attributes
        assert got["nul"].attributes == {"completion": "a\x00b", "\x00key": 1}
        kinds = await sql(f"SELECT span_id, jsonb_typeof(data), raw IS NOT NULL FROM {schema}.spans ORDER BY span_id")
        assert kinds == [("nul", None, True), ("plain", "object", False)]


async def test_a_batch_of_10000_spans_is_stored_in_one_call_with_consecutive_sequence_ids() -> None:
    async with servers(1) as (store,):
        await store.enqueue_rollout("x")
        claim = await store.claim_rollout("w")
        assert claim is not None
        rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
        batch = [
            Span(rollout_id=rid, attempt_id=aid, span_id=f"s{i}", name="step", attributes={"i": i})
            for i in range(10_000)
        ]

        started = time.monotonic()
        stored = await store.add_spans(batch)
        elapsed = time.monotonic() - started

        assert [s.sequence_id for s in stored] == list(range(10_000))
        assert (await store.stats()).total_spans == 10_000
        again = await store.add_spans(batch[:100])  # re-sent: returned as stored, nothing new
        assert [s.sequence_id for s in again] == list(range(100))
        assert (await store.stats()).total_spans == 10_000
        assert elapsed < 30


async def test_many_calls_on_a_store_not_yet_started_open_it_once() -> None:
    from agentbolt.store.postgres.schema import SCHEMA_VERSION

    store = postgres_store()
    try:
        results = await asyncio.gather(*(store.enqueue_rollout(i) for i in range(20)))
        # a second opening would have found the schema current and reported 0
        assert store.migrations_applied == SCHEMA_VERSION
        assert (await store.stats()).total_rollouts == len({r.rollout_id for r in results}) == 20
    finally:
        await store.close()


def test_a_store_whose_event_loop_ended_reopens_on_the_next_loop(caplog: pytest.LogCaptureFixture) -> None:
    # e.g. a script calling asyncio.run() once per step with the same store object
    store = postgres_store()
    r = asyncio.run(store.enqueue_rollout("first loop"))

    async def second() -> str:
        try:
            return (await store.get_rollout(r.rollout_id)).input
        finally:
            await store.close()

    with caplog.at_level("WARNING", logger="agentbolt.store.postgres"):
        assert asyncio.run(second()) == "first loop"
    assert "has ended; opening a new pool" in caplog.text


async def test_concurrent_writes_commit_as_groups_and_a_failing_op_fails_alone() -> None:
    """Group commit: writes waiting at the same time share one transaction; an op the
    store refuses (unknown attempt, forbidden transition, a span name PostgreSQL cannot
    hold) fails with its own error and the others of its group are still stored."""
    async with servers(1) as (store,):
        await store.enqueue_rollouts([RolloutCreate(input={"i": i}) for i in range(40)])
        claims = []
        for _ in range(40):
            claims += await store.claim_rollouts("w", 1)
        groups = store._engine.groups
        transactions_before = groups.transactions
        ops, expect_ok = [], []
        for k, claim in enumerate(claims):
            rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
            if k % 5 == 0:
                ops.append(store.heartbeat(rid, "no-such-attempt"))
                expect_ok.append(False)
            elif k % 5 == 1:  # a NUL in a name: PostgreSQL refuses it (the attributes could keep it)
                ops.append(store.add_spans([Span(rollout_id=rid, attempt_id=aid, name="a\x00b")]))
                expect_ok.append(False)
            elif k % 5 == 2:
                ops.append(store.update_rollout(rid, status=R.SUCCEEDED))  # preparing -> succeeded: refused
                expect_ok.append(False)
            else:
                ops.append(store.add_spans([Span(rollout_id=rid, attempt_id=aid, name="work")]))
                ops.append(store.update_attempt(rid, aid, status=A.SUCCEEDED))
                expect_ok += [True, True]
        results = await asyncio.gather(*ops, return_exceptions=True)
        assert [not isinstance(r, BaseException) for r in results] == expect_ok
        assert groups.transactions - transactions_before < len(ops)  # some ops shared a transaction
        for k, claim in enumerate(claims):
            rollout = await store.get_rollout(claim.rollout.rollout_id)
            spans = (await store.query_spans(rollout.rollout_id)).items
            if k % 5 in (3, 4):
                assert rollout.status == R.SUCCEEDED and [s.name for s in spans] == ["work"]
            else:
                assert rollout.status in (R.PREPARING, R.RUNNING) and spans == []
