"""``agentbolt server --workers N``: N server processes on one port and one PostgreSQL
store; a worker that dies is replaced; stores processes cannot share are refused."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agentbolt.cli import app
from agentbolt.store.http import HttpStore
from agentbolt.types import AttemptStatus, RolloutCreate

from .cluster import Server


@pytest.mark.parametrize("store", ["sqlite:///runs/store.db", "memory://"])
def test_workers_need_a_store_processes_can_share(store: str) -> None:
    result = CliRunner().invoke(app, ["server", "--store", store, "--workers", "2"], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert f"--workers 2 needs a store several processes can share: --store postgresql://...; {store}" in " ".join(
        result.output.split()
    )


def test_workers_do_not_combine_with_the_gateway() -> None:
    result = CliRunner().invoke(
        app,
        ["server", "--store", "postgresql://127.0.0.1:1/x", "--workers", "2", "--engine", "openai",
         "--engine-url", "http://127.0.0.1:8000/v1"],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code == 2 and "--engine serves the model gateway from one process" in result.output


def _children(pid: int) -> set[int]:
    kids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.add(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow
def test_two_workers_serve_one_port_and_a_killed_worker_is_replaced(tmp_path: Path) -> None:
    from tests.store.postgres_support import POSTGRES_URL, new_schema, require_postgres

    require_postgres()
    from agentbolt.store.postgres import PostgresStore

    schema = new_schema()
    server = Server(f"{POSTGRES_URL}?schema={schema}", tmp_path, extra=["--workers", "2"])
    server.start()
    try:
        assert server.proc is not None
        parent = server.proc.pid
        _wait_for(lambda: len(_children(parent)) == 2)
        first = _children(parent)

        async def work(tag: str) -> None:  # many connections: the kernel spreads them over both workers
            store = HttpStore(server.url, batching=False)
            ids = [f"{tag}-{i}" for i in range(30)]
            await store.enqueue_rollouts([RolloutCreate(rollout_id=rid, input=rid) for rid in ids])
            claims = [c for _ in range(30) for c in await store.claim_rollouts("w", 1)]
            assert sorted(c.rollout.rollout_id for c in claims) == sorted(ids)  # each once
            await asyncio.gather(*(store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id,
                                                        status=AttemptStatus.SUCCEEDED) for c in claims))
            await store.close()

        asyncio.run(work("a"))
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        _wait_for(lambda: len(_children(parent)) == 2 and victim not in _children(parent))
        assert server.alive
        _wait_for(lambda: httpx.get(server.url + "/healthz", timeout=2).status_code == 200)
        asyncio.run(work("b"))  # served on, by the survivor and the replacement
        assert "exited with -9: starting a new one" in server.log.read_text()
    finally:
        code = server.stop()
    assert code == 0, server.tail()
    assert not _children(parent)

    async def check() -> int:
        store = PostgresStore(POSTGRES_URL, schema=schema, drop_schema_on_close=True)
        await store.start()
        try:
            return (await store.stats()).rollouts_by_status["succeeded"]
        finally:
            await store.close()

    assert asyncio.run(check()) == 60
