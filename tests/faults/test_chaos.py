"""Chaos: real ``agentbolt server`` and ``agentbolt runner`` processes, 2,000 rollouts,
kill -9 of runners and of a server at seeded random moments (the server restarted on
the same port) — and afterwards nothing lost, nothing done twice, every acknowledged span
stored, the statistics adding up. What is checked, and what "acknowledged" means, is in
the docstring of :mod:`tests.faults.chaos`.

``CHAOS_SEED=<n>`` replays a run (the seed and the faults are printed).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agentbolt.store.sqlite import SqliteStore

from .chaos import ChaosPlan, audit, run_chaos
from .cluster import Server

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("CHAOS_SEED", "8"))


def _report(run, figures, audit_seconds: float) -> None:  # shown with -s
    print(
        f"{run.plan.rollouts} rollouts in {run.elapsed:.1f} s ({run.plan.rollouts / run.elapsed:.0f}/s), "
        f"audited in {audit_seconds:.1f} s; "
        f"server back after {', '.join(f'{s:.1f}' for s in run.restart_seconds)} s; "
        f"attempts {dict(figures.attempts)}; {figures.retried} rollouts retried; {figures.spans} spans",
        flush=True,
    )


def test_sqlite_server_restarted_and_two_runners_killed_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    server = Server(f"sqlite:///{db}", tmp_path)
    server.start()
    plan = ChaosPlan(seed=SEED)
    try:
        run = run_chaos([server], tmp_path, plan)
    finally:
        server.stop()
    killed = run.killed_workers
    assert len(killed) == 2
    # the survivors left cleanly (SIGTERM: finish running work, mark themselves offline)
    assert {w: c for w, c in run.exit_codes.items() if w not in killed} == {
        w: 0 for w in run.exit_codes if w not in killed
    }, run.logs()

    async def check():
        store = SqliteStore(db)
        await store.start()
        try:
            return await audit(store, run)
        finally:
            await store.close()

    t0 = time.monotonic()
    figures = asyncio.run(check())
    _report(run, figures, time.monotonic() - t0)
    # the kills hit work in flight, which was retried elsewhere
    assert figures.attempts["unresponsive"] >= 1 and figures.retried >= 1


def test_postgres_two_servers_one_restarted_and_two_runners_killed_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    from tests.store.postgres_support import POSTGRES_URL, new_schema, require_postgres

    require_postgres()
    from agentbolt.store.postgres import PostgresStore

    schema = new_schema()
    url = f"{POSTGRES_URL}?schema={schema}"
    servers = [Server(url, tmp_path, name=f"server-{k}") for k in range(2)]
    try:
        for s in servers:
            s.start()
        # each runner starts on the server its worker id picks (4 and 4 here) and fails over
        run = run_chaos(servers, tmp_path, ChaosPlan(seed=SEED))
    finally:
        for s in servers:
            s.stop()
    killed = run.killed_workers
    assert {w: c for w, c in run.exit_codes.items() if w not in killed} == {
        w: 0 for w in run.exit_codes if w not in killed
    }, run.logs()
    down = next(servers[f.target] for f in run.plan.faults if f.kind == "server")
    switched = [r.worker_id for r in run.runners if f"store server {down.url} failed" in r.log.read_text()]
    assert switched, "no runner failed over from the killed server"

    async def check():
        store = PostgresStore(POSTGRES_URL, schema=schema, drop_schema_on_close=True)
        await store.start()
        try:
            return await audit(store, run)
        finally:
            await store.close()

    t0 = time.monotonic()
    figures = asyncio.run(check())
    _report(run, figures, time.monotonic() - t0)
    print(f"runners that failed over from {down.name}: {', '.join(switched)}")
    assert figures.attempts["unresponsive"] >= 1 and figures.retried >= 1
