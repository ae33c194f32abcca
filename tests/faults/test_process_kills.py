"""Fault tests with real processes and SIGKILL (acceptance of the control-plane issue)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from agentbolt.store.http import HttpStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import AttemptStatus, RolloutConfig, RolloutStatus

from .procs import ServerProcess, read_line_with, spawn_script

pytestmark = pytest.mark.slow


def test_killed_runner_attempt_turns_unresponsive_and_another_runner_completes_it(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "store.db")
    server.start()
    runners = []
    try:
        store = HttpStore(server.url)
        rollout = asyncio.run(
            store.enqueue_rollout({"task": 1}, config=RolloutConfig(unresponsive_seconds=1.0, max_attempts=3))
        )
        first = spawn_script("claim_and_hang", server.url, "runner-a")
        runners.append(first)
        rid, aid1 = read_line_with(first, "CLAIMED ").split()
        assert rid == rollout.rollout_id
        time.sleep(0.3)  # it is heartbeating now
        first.kill()
        first.wait(10)

        second = spawn_script("claim_and_finish", server.url, "runner-b")
        runners.append(second)
        rid2, aid2 = read_line_with(second, "DONE ", timeout=30).split()
        assert second.wait(30) == 0

        async def check() -> None:
            s = HttpStore(server.url)
            r = await s.get_rollout(rid)
            attempts = await s.query_attempts(rid)
            spans = await s.get_spans(rid)
            await s.close()
            assert r.status == RolloutStatus.SUCCEEDED
            assert rid2 == rid and aid2 != aid1
            assert [a.status for a in attempts] == [AttemptStatus.UNRESPONSIVE, AttemptStatus.SUCCEEDED]
            assert [a.worker_id for a in attempts] == ["runner-a", "runner-b"]
            # the killed attempt's span is kept: nothing is lost
            assert sorted((s.attempt_id, s.name) for s in spans) == sorted([(aid1, "step-1"), (aid2, "step-1")])

        asyncio.run(check())
    finally:
        for p in runners:
            if p.poll() is None:
                p.kill()
        server.stop()


def test_server_killed_while_16_clients_write_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    server = ServerProcess(db)
    server.start()
    writers = spawn_script("writers", server.url, "16", "12")
    try:
        read_line_with(writers, "PROGRESS 120", timeout=60)
        server.kill9()
        time.sleep(0.5)
        server.start()  # same file, same port
        acks = json.loads(read_line_with(writers, "ACKS ", timeout=120))
        assert writers.wait(30) == 0
    finally:
        if writers.poll() is None:
            writers.kill()
        server.stop()

    async def check() -> None:
        store = SqliteStore(db)
        await store.start()
        try:
            enqueued = acks["enqueued"]
            assert len(enqueued) == 16 * 12 and len(set(enqueued)) == len(enqueued)
            page = await store.query_rollouts(limit=10_000)
            stored_ids = [r.rollout_id for r in page.items]
            assert Counter(stored_ids) == Counter(enqueued)  # every acknowledged rollout, once
            by_id = {r.rollout_id: r for r in page.items}
            for rid, aid in acks["succeeded"]:
                att = await store.get_attempt(rid, aid)
                assert att.status == AttemptStatus.SUCCEEDED
                assert by_id[rid].status == RolloutStatus.SUCCEEDED
            # every rollout finished in the end
            assert all(r.status == RolloutStatus.SUCCEEDED for r in page.items)
            acked_spans = {tuple(x) for x in acks["spans"]}
            stored = Counter()
            for rid in stored_ids:
                for s in await store.get_spans(rid):
                    stored[(s.rollout_id, s.attempt_id, s.span_id)] += 1
            assert all(n == 1 for n in stored.values())  # none duplicated
            missing = acked_spans - set(stored)
            assert not missing, f"{len(missing)} acknowledged spans lost"
            stats = await store.stats()
            assert stats.total_spans == sum(stored.values())
            assert stats.total_rollouts == len(enqueued)
        finally:
            await store.close()

    asyncio.run(check())
