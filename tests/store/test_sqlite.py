"""SqliteStore beyond the conformance suite: durability, the file format and its
migrations, several OS processes on one file, and group commit.

Processes here are real: child Python interpreters run small scripts against the same
database file as the test.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentbolt import semconv
from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError, NotFoundError, StoreError
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.store.sqlite.engine import WriteTx
from agentbolt.store.sqlite.schema import MIGRATIONS, SCHEMA_VERSION, Migration, connect, migrate
from agentbolt.types import (
    LLM,
    AttemptStatus,
    Page,
    PromptTemplate,
    Rollout,
    RolloutConfig,
    RolloutCreate,
    RolloutStatus,
    Span,
    WorkerStatus,
)

A = AttemptStatus
R = RolloutStatus


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
async def sqlite_store(db: Path) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(db, deadline_check_interval=0.02)
    await s.start()
    yield s
    await s.close()


def _span(rid: str, aid: str, name: str = "step", **kw: object) -> Span:
    return Span(rollout_id=rid, attempt_id=aid, name=name, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- durability
async def test_everything_written_is_there_after_close_and_reopen(db: Path) -> None:
    first = SqliteStore(db)
    await first.start()
    res = await first.add_resources(
        {"llm": LLM(endpoint="http://x/v1", model="m"), "prompt": PromptTemplate(template="{q}")}
    )
    done, waiting = await first.enqueue_rollouts(
        [RolloutCreate(input={"q": "done"}, metadata={"k": 1}), RolloutCreate(input=[1, 2], rollout_id="later")]
    )
    claim = await first.claim_rollout("w1")
    assert claim is not None and claim.rollout.rollout_id == done.rollout_id
    reward = _span(
        done.rollout_id,
        claim.attempt.attempt_id,
        semconv.REWARD_SPAN,
        attributes=semconv.reward_span_attributes({"acc": 0.5}, "acc"),
    )
    spans = await first.add_spans([_span(done.rollout_id, claim.attempt.attempt_id), reward])
    await first.update_attempt(done.rollout_id, claim.attempt.attempt_id, status=A.SUCCEEDED)
    await first.update_worker("w2", status=WorkerStatus.OFFLINE, metadata={"host": "a"})
    secret = await first.get_secret()
    before = {r.rollout_id: r for r in (await first.query_rollouts()).items}
    await first.close()

    again = SqliteStore(db)
    await again.start()
    try:
        assert {r.rollout_id: r for r in (await again.query_rollouts()).items} == before
        assert (await again.get_rollout(done.rollout_id)).status == R.SUCCEEDED
        assert (await again.get_rollout(done.rollout_id)).reward == 0.5
        assert await again.get_spans(done.rollout_id) == spans
        assert await again.get_resources(1) == res
        assert (await again.get_worker("w2")).metadata == {"host": "a"}
        assert await again.get_secret() == secret
        # the queue picks up where it was
        nxt = await again.claim_rollout("w3")
        assert nxt is not None and nxt.rollout.rollout_id == waiting.rollout_id
        assert nxt.rollout.resources_version == res.version
    finally:
        await again.close()


async def test_the_file_is_in_wal_mode_and_every_connection_syncs_fully(sqlite_store: SqliteStore, db: Path) -> None:
    await sqlite_store.enqueue_rollout("x")
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    full = 2
    assert await sqlite_store._write(lambda c, tx: c.execute("PRAGMA synchronous").fetchone()[0]) == full
    assert await sqlite_store._read(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]) == full


async def test_a_store_used_without_start_opens_itself_and_close_is_idempotent(db: Path) -> None:
    s = SqliteStore(db)
    r = await s.enqueue_rollout("x")  # no start()
    await s.close()
    await s.close()
    assert (await s.get_rollout(r.rollout_id)).input == "x"  # used again: reopens
    await s.close()


async def test_a_memory_path_is_refused_with_a_pointer_to_memorystore() -> None:
    with pytest.raises(InvalidRequestError, match="MemoryStore"):
        SqliteStore(":memory:")


async def test_an_input_that_is_not_json_is_refused_and_nothing_is_queued(sqlite_store: SqliteStore) -> None:
    with pytest.raises(InvalidRequestError, match="JSON"):
        await sqlite_store.enqueue_rollouts([RolloutCreate(input="ok"), RolloutCreate(input=object())])

    assert (await sqlite_store.stats()).total_rollouts == 0


# ---------------------------------------------------------------------------- migrations
async def test_migrations_run_once_and_set_user_version(db: Path) -> None:
    for expected in (SCHEMA_VERSION, 0):
        s = SqliteStore(db)
        await s.start()
        assert s.migrations_applied == expected
        await s.close()
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == len(MIGRATIONS)


def test_opening_an_older_schema_applies_only_the_missing_steps(db: Path) -> None:
    conn = connect(db, busy_timeout=5)
    try:
        assert migrate(conn) == len(MIGRATIONS)
        newer = [*MIGRATIONS, Migration("workers get a note", ("ALTER TABLE workers ADD COLUMN note TEXT",))]

        assert migrate(conn, newer) == 1
        assert migrate(conn, newer) == 0
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(newer)
        assert "note" in [row[1] for row in conn.execute("PRAGMA table_info(workers)")]
    finally:
        conn.close()


async def test_a_database_from_a_newer_agentbolt_is_refused(db: Path) -> None:
    with sqlite3.connect(db) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    s = SqliteStore(db)
    with pytest.raises(StoreError, match="upgrade agentbolt"):
        await s.start()
    await s.close()


# ---------------------------------------------------------------------------- group commit
async def test_a_failing_op_rolls_back_alone_and_the_rest_of_its_group_commits(sqlite_store: SqliteStore) -> None:
    await sqlite_store.enqueue_rollout("x")
    claim = await sqlite_store.claim_rollout("w")
    assert claim is not None
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id

    # hold the writer so that the next ops queue up and run as one transaction
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection, tx: WriteTx) -> None:
        entered.set()
        release.wait(10)

    def write_then_fail(conn: sqlite3.Connection, tx: WriteTx) -> None:
        conn.execute("INSERT INTO meta (key, value) VALUES ('probe', x'00')")
        raise RuntimeError("boom")

    held = asyncio.ensure_future(sqlite_store._write(hold))
    assert await asyncio.to_thread(entered.wait, 10)
    committed_before = sqlite_store._writer.transactions  # type: ignore[union-attr]
    group = [
        asyncio.ensure_future(sqlite_store._write(write_then_fail)),
        asyncio.ensure_future(sqlite_store.update_attempt(rid, "at-unknown", status=A.SUCCEEDED)),
        asyncio.ensure_future(sqlite_store.add_spans([_span(rid, aid, "a"), _span(rid, aid, "b")])),
        asyncio.ensure_future(sqlite_store.update_worker("w", metadata={"after": True})),
    ]
    await asyncio.sleep(0.05)  # every op is queued behind `hold`
    release.set()
    await held
    failed, unknown, spans, worker = await asyncio.gather(*group, return_exceptions=True)

    assert sqlite_store._writer.transactions == committed_before + 2  # type: ignore[union-attr]  # hold's, then the group
    assert isinstance(failed, RuntimeError)
    assert isinstance(unknown, NotFoundError)
    assert [s.sequence_id for s in spans] == [0, 1]  # type: ignore[union-attr]
    assert [s.name for s in await sqlite_store.get_spans(rid)] == ["a", "b"]
    assert (await sqlite_store.get_worker("w")).metadata == {"after": True}
    assert (await sqlite_store.get_attempt(rid, aid)).status == A.RUNNING
    probe = "SELECT count(*) FROM meta WHERE key = 'probe'"
    assert await sqlite_store._read(lambda c: c.execute(probe).fetchone()[0]) == 0


async def test_a_batch_mixing_re_sent_and_new_spans_numbers_only_the_new_ones(sqlite_store: SqliteStore) -> None:
    await sqlite_store.enqueue_rollout("x")
    claim = await sqlite_store.claim_rollout("w")
    assert claim is not None
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    first = await sqlite_store.add_spans([_span(rid, aid, "a", span_id="a"), _span(rid, aid, "b", span_id="b")])

    again = await sqlite_store.add_spans(
        [_span(rid, aid, "c", span_id="c"), _span(rid, aid, "b2", span_id="b"), _span(rid, aid, "d", span_id="d")]
    )

    assert [(s.span_id, s.name, s.sequence_id) for s in again] == [("c", "c", 2), ("b", "b", 1), ("d", "d", 3)]
    assert again[1] == first[1]
    stored = await sqlite_store.get_spans(rid)
    assert [(s.span_id, s.sequence_id) for s in stored] == [("a", 0), ("b", 1), ("c", 2), ("d", 3)]


@pytest.mark.parametrize("size", [1, 3, 128, 129, 300])
async def test_a_span_batch_of_any_size_is_stored_whole_and_in_order(sqlite_store: SqliteStore, size: int) -> None:
    # many rows go in a few multi-row INSERTs (power-of-two chunks); none may be lost or reordered
    await sqlite_store.enqueue_rollout("x")
    claim = await sqlite_store.claim_rollout("w")
    assert claim is not None
    rid, aid = claim.rollout.rollout_id, claim.attempt.attempt_id
    await sqlite_store.add_spans([_span(rid, aid, "first", span_id="first")])

    out = await sqlite_store.add_spans(
        [_span(rid, aid, f"s{i}", span_id=f"s{i}") for i in range(size)] + [_span(rid, aid, "re", span_id="first")]
    )

    assert [s.sequence_id for s in out] == [*range(1, size + 1), 0]
    stored = await sqlite_store.get_spans(rid)
    assert [(s.span_id, s.sequence_id) for s in stored] == [("first", 0)] + [(f"s{i}", i + 1) for i in range(size)]


# ---------------------------------------------------------------------------- several writers on one file
async def test_two_store_objects_on_one_file_expire_an_attempt_once(db: Path) -> None:
    one, two = SqliteStore(db, deadline_check_interval=3600), SqliteStore(db, deadline_check_interval=3600)
    try:
        await one.enqueue_rollout("x", config=RolloutConfig(timeout_seconds=0.05))
        claim = await one.claim_rollout("w")
        assert claim is not None
        await asyncio.sleep(0.1)

        expired = await asyncio.gather(one.check_deadlines(), two.check_deadlines(), one.check_deadlines())

        assert sum(expired) == 1
        assert (await two.get_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id)).status == A.TIMEOUT
        assert (await two.get_rollout(claim.rollout.rollout_id)).status == R.REQUEUING
    finally:
        await one.close()
        await two.close()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork()")
async def test_a_forked_child_process_opens_its_own_connections_and_the_parent_goes_on(
    sqlite_store: SqliteStore,
) -> None:
    first, second = await sqlite_store.enqueue_rollouts([RolloutCreate(input=1), RolloutCreate(input=2)])

    def child() -> None:  # runs in the forked process, on the inherited store object
        async def main() -> None:
            claim = await sqlite_store.claim_rollout("child")
            assert claim is not None and claim.rollout.rollout_id == first.rollout_id
            await sqlite_store.update_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id, status=A.SUCCEEDED)
            await sqlite_store.close()

        asyncio.run(main())

    proc = multiprocessing.get_context("fork").Process(target=child)
    proc.start()
    await asyncio.to_thread(proc.join, 60)

    assert proc.exitcode == 0
    assert (await sqlite_store.get_rollout(first.rollout_id)).status == R.SUCCEEDED
    claim = await sqlite_store.claim_rollout("parent")
    assert claim is not None and claim.rollout.rollout_id == second.rollout_id


_CLAIMER = """
import asyncio, json, sys
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import AttemptStatus

async def main(path):
    store = SqliteStore(path)
    await store.start()
    print("ready", flush=True)
    sys.stdin.readline()  # wait for "go": both processes start claiming together
    async def claimer(i):
        taken = []
        while claims := await store.claim_rollouts(f"{i}", limit=1 + i % 3):
            await asyncio.sleep(0.01)  # "work": neither process can drain the queue alone at once
            for c in claims:
                taken.append(c.rollout.rollout_id)
                await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=AttemptStatus.SUCCEEDED)
        return taken
    results = await asyncio.gather(*(claimer(i) for i in range(4)))
    await store.close()
    print(json.dumps([rid for taken in results for rid in taken]), flush=True)

asyncio.run(main(sys.argv[1]))
"""


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_two_processes_claiming_from_one_file_claim_every_rollout_exactly_once(db: Path) -> None:
    async def setup() -> list[str]:
        async with SqliteStore(db) as s:
            return [r.rollout_id for r in await s.enqueue_rollouts([RolloutCreate(input=i) for i in range(200)])]

    ids = asyncio.run(setup())
    procs = [_spawn(_CLAIMER, str(db)) for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.stderr and p.stderr.read()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill() if p.poll() is None else None
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
    per_process = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]

    counts = Counter(rid for taken in per_process for rid in taken)
    assert sorted(counts) == sorted(ids), "every rollout was claimed"
    assert [rid for rid, n in counts.items() if n > 1] == [], "no rollout was claimed twice"
    assert all(len(taken) > 0 for taken in per_process), "both processes took part"

    async def check() -> None:
        async with SqliteStore(db) as s:
            stats = await s.stats()
            assert stats.total_attempts == 200
            assert stats.rollouts_by_status["succeeded"] == 200

    asyncio.run(check())


_FINISHER = """
import asyncio, sys, time
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import AttemptStatus

async def main(path):
    async with SqliteStore(path) as store:
        claim = await store.claim_rollout("other-process")
        await store.update_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id, status=AttemptStatus.SUCCEEDED)
        print(time.time(), flush=True)

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.slow
async def test_a_completion_by_another_process_wakes_wait_for_rollouts_within_a_second(
    sqlite_store: SqliteStore, db: Path
) -> None:
    r = await sqlite_store.enqueue_rollout("x")

    async def wait() -> tuple[list[Rollout], float]:
        done = await sqlite_store.wait_for_rollouts([r.rollout_id], timeout=60)
        return done, time.time()

    waiter = asyncio.ensure_future(wait())

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _FINISHER, str(db), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    finished_at = float(out.decode().strip())
    done, woke_at = await asyncio.wait_for(waiter, timeout=5)

    assert [x.status for x in done] == [R.SUCCEEDED]
    assert woke_at - finished_at < 1.0


# ---------------------------------------------------------------------------- same behaviour as the reference
_CLOCK_FIELDS = {"created_at", "updated_at", "start_time", "end_time", "last_heartbeat_time"}


def _outcome(value: object, attempt_names: dict[str, str]) -> object:
    """A result with clock fields dropped and random attempt ids replaced by stable names."""
    if isinstance(value, BaseException):
        return ("raises", type(value).__name__)
    if isinstance(value, list):
        return [_outcome(v, attempt_names) for v in value]
    if isinstance(value, Page):  # cursors are backend-specific: only whether there is one
        return {"items": _outcome(value.items, attempt_names), "more": value.next_cursor is not None}
    if hasattr(value, "model_dump"):
        data = value.model_dump(mode="json", exclude=_CLOCK_FIELDS & set(type(value).model_fields))
        for key in ("attempt_id", "latest_attempt_id", "current_attempt_id"):
            if isinstance(data.get(key), str):
                data[key] = attempt_names.get(data[key], "?")
        if "rollout" in data and "attempt" in data:  # a Claim
            return {
                "rollout": _outcome(value.rollout, attempt_names),
                "attempt": _outcome(value.attempt, attempt_names),
            }
        return data
    return value


async def _random_step(rng: random.Random, store: Store, names: dict[str, str], ids: list[str]) -> object:
    """One random operation; ``names`` maps this store's attempt ids to stable names."""
    reverse = {v: k for k, v in names.items()}
    rid = rng.choice(ids)
    known = [n for n in reverse if n.startswith(rid + "#")]
    aname = rng.choice(known) if known and rng.random() < 0.9 else rid + "#9"
    aid = reverse.get(aname, "at-missing")
    try:
        match rng.randrange(8):
            case 0:
                retry = rng.choice([[], [A.FAILED]])
                specs = [
                    RolloutCreate(
                        rollout_id=rng.choice(ids),
                        input={"n": rng.random()},
                        config=RolloutConfig(max_attempts=rng.randint(1, 3), retry_on=retry),
                    )
                ]
                return await store.enqueue_rollouts(specs)
            case 1:
                claims = await store.claim_rollouts(f"w{rng.randrange(3)}", limit=rng.randint(1, 3))
                for c in claims:
                    names[c.attempt.attempt_id] = f"{c.rollout.rollout_id}#{c.attempt.sequence_id}"
                return claims
            case 2:
                span_ids = [str(rng.randrange(4)) for _ in range(rng.randint(1, 3))]
                reward = semconv.reward_span_attributes({"r": rng.random()}, "r")
                return await store.add_spans(
                    [
                        _span(rid, aid, semconv.REWARD_SPAN, span_id=s, trace_id="t", attributes=reward, start_time=1.0)
                        for s in span_ids
                    ]
                )
            case 3:
                status = rng.choice([A.RUNNING, A.SUCCEEDED, A.FAILED, A.PREPARING])
                return await store.update_attempt(rid, aid, status=status, metadata={"k": rng.randrange(3)})
            case 4:
                return await store.heartbeat(rid, aid)
            case 5:
                return await store.update_rollout(rid, status=rng.choice([R.CANCELLED, None]), metadata={"m": 1})
            case 6:
                return await store.update_worker(f"w{rng.randrange(3)}", status=rng.choice(list(WorkerStatus)))
            case _:
                return await store.query_spans(rid, rng.choice([None, "latest", aid]), limit=rng.randint(1, 3))
    except Exception as exc:
        return exc


async def _state(store: Store, names: dict[str, str], rollout_id: str) -> object:
    """Everything stored about one rollout, comparable across backends."""
    try:
        rollout = await store.get_rollout(rollout_id)
    except NotFoundError as exc:
        return _outcome(exc, names)
    attempts = await store.query_attempts(rollout_id)
    return [_outcome(x, names) for x in (rollout, attempts, await store.get_spans(rollout_id))]


@pytest.mark.parametrize("seed", range(3))
async def test_random_operations_give_the_same_results_as_memorystore(sqlite_store: SqliteStore, seed: int) -> None:
    reference = MemoryStore()
    ids = [f"r{i}" for i in range(10)]
    names: tuple[dict[str, str], dict[str, str]] = ({}, {})
    rngs = (random.Random(seed), random.Random(seed))
    for step in range(200):
        got = await _random_step(rngs[0], sqlite_store, names[0], ids)
        want = await _random_step(rngs[1], reference, names[1], ids)
        assert _outcome(got, names[0]) == _outcome(want, names[1]), f"step {step}"

    for rid in ids:
        assert await _state(sqlite_store, names[0], rid) == await _state(reference, names[1], rid), rid
    assert _outcome(await sqlite_store.query_workers(), names[0]) == _outcome(await reference.query_workers(), names[1])
