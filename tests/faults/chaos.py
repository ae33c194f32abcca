"""The chaos run: servers and runner processes, faults at seeded moments, then an audit.

:func:`run_chaos` enqueues the rollouts, starts the runners (``agentbolt runner``, each
on every server URL given: it picks one and fails over), and while they work it kills
-9 the planned runners and a server at moments given as fractions of the rollouts
finished — drawn from a seeded random generator and logged, so a failure can be replayed
with the same seed — restarting the server on the same port. It returns when every
rollout has succeeded (or raises at the deadline), having stopped the surviving runners
with SIGTERM.

:func:`audit` then reads the store (any backend) and checks, with the agents' side files
(:mod:`.chaos_agent`):

* every rollout succeeded, with exactly one succeeded attempt — its latest — and reward 1;
* no attempt ran twice (each attempt id started by one agent run only, in the process of
  the worker the store names), so each claim was handed out once;
* every other attempt is one a killed runner left behind (unresponsive): live runners lost
  nothing to the server's outage;
* every acknowledged span is stored, once. A span is *acknowledged* when the store shows
  its attempt succeeded: the runner reports success only after ``tracer.flush`` confirmed
  the store took every span of the attempt (and reports a retryable failure otherwise).
  So each succeeded attempt must have its root span, its ``STEPS`` annotation spans and
  its reward span; spans of killed attempts may be partial, but none is duplicated;
* the store's statistics equal the counts read item by item.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agentbolt.store.base import Store
from agentbolt.store.http import HttpStore
from agentbolt.types import AttemptStatus, RolloutConfig, RolloutCreate, RolloutStatus

from .chaos_agent import STEPS
from .cluster import Runner, Server

log = logging.getLogger("agentbolt.tests.chaos")


@dataclass
class Fault:
    at_fraction: float
    kind: str  # "runner" | "server"
    target: int
    downtime: float = 0.0
    fired_at: float | None = None

    def describe(self) -> str:
        extra = f", down {self.downtime:.2f} s" if self.kind == "server" else ""
        return f"kill -9 {self.kind} {self.target} at {self.at_fraction:.0%} done{extra}"


@dataclass
class ChaosPlan:
    seed: int
    rollouts: int = 2000
    runners: int = 8
    concurrency: int = 8
    runner_kills: int = 2
    server_kills: int = 1
    unresponsive_seconds: float = 30.0
    """Longer than a server's outage — kill, restart: 2 to 10 s on this loaded 2-core
    machine — so live runners never lose an attempt to it (their heartbeats stop while it
    is down); short enough that killed runners' attempts come back before the run ends."""
    deadline: float = 150.0
    faults: list[Fault] = field(default_factory=list)

    def draw(self, n_servers: int) -> None:
        rng = random.Random(self.seed)
        victims = rng.sample(range(self.runners), self.runner_kills)
        self.faults = [Fault(rng.uniform(0.1, 0.5), "runner", v) for v in victims]
        self.faults += [
            Fault(rng.uniform(0.2, 0.7), "server", rng.randrange(n_servers), downtime=rng.uniform(0.1, 1.0))
            for _ in range(self.server_kills)
        ]
        self.faults.sort(key=lambda f: f.at_fraction)


@dataclass
class ChaosRun:
    plan: ChaosPlan
    servers: list[Server]
    runners: list[Runner]
    log_dir: Path
    elapsed: float = 0.0
    restart_seconds: list[float] = field(default_factory=list)
    exit_codes: dict[str, int | None] = field(default_factory=dict)

    @property
    def killed_workers(self) -> set[str]:
        return {self.runners[f.target].worker_id for f in self.plan.faults if f.kind == "runner"}

    def logs(self) -> str:
        return "\n".join(p.tail() for p in [*self.servers, *self.runners])


def _succeeded(servers: list[Server]) -> int | None:
    for server in servers:
        if not server.alive:
            continue
        try:
            r = httpx.get(server.url + "/v1/stats", timeout=5.0)
            if r.status_code == 200:
                return int(r.json()["rollouts_by_status"].get("succeeded", 0))
        except httpx.HTTPError:
            continue
    return None


async def _enqueue(urls: list[str], plan: ChaosPlan) -> None:
    store = HttpStore(urls)
    cfg = RolloutConfig(unresponsive_seconds=plan.unresponsive_seconds, max_attempts=10)
    try:
        for i in range(0, plan.rollouts, 500):
            n = min(500, plan.rollouts - i)
            await store.enqueue_rollouts(
                [RolloutCreate(rollout_id=f"chaos-{i + j:05d}", input={"i": i + j}, config=cfg) for j in range(n)]
            )
    finally:
        await store.close()


def run_chaos(servers: list[Server], log_dir: Path, plan: ChaosPlan) -> ChaosRun:
    """Run the plan against started ``servers`` (see the module docstring)."""
    plan.draw(len(servers))
    urls = [s.url for s in servers]
    log.warning("chaos seed %d: %s", plan.seed, "; ".join(f.describe() for f in plan.faults))
    print(f"chaos seed {plan.seed}: " + "; ".join(f.describe() for f in plan.faults), flush=True)
    run = ChaosRun(plan, servers, [], log_dir)
    t0 = time.monotonic()
    asyncio.run(_enqueue(urls, plan))
    run.runners = [Runner(urls, log_dir, f"chaos-runner-{k}", concurrency=plan.concurrency) for k in range(plan.runners)]
    try:
        for r in run.runners:
            r.start()
        pending = list(plan.faults)
        done = 0
        while done < plan.rollouts:
            if time.monotonic() - t0 > plan.deadline:
                raise TimeoutError(f"{done} of {plan.rollouts} rollouts succeeded after {plan.deadline} s\n{run.logs()}")
            for r in run.runners:
                if r.proc is not None and r.proc.poll() is not None and r.worker_id not in run.killed_workers:
                    raise RuntimeError(f"runner {r.worker_id} exited with {r.proc.returncode}\n{run.logs()}")
            while pending and done >= pending[0].at_fraction * plan.rollouts:
                fault = pending.pop(0)
                fault.fired_at = time.monotonic() - t0
                print(f"t={fault.fired_at:5.1f}s done={done}: {fault.describe()}", flush=True)
                if fault.kind == "runner":
                    run.runners[fault.target].kill9()
                else:
                    server = servers[fault.target]
                    server.kill9()
                    time.sleep(fault.downtime)
                    run.restart_seconds.append(fault.downtime + server.start())
            time.sleep(0.2)
            done = _succeeded(servers) or done
        run.elapsed = time.monotonic() - t0
    finally:
        for r in run.runners:
            run.exit_codes[r.worker_id] = r.stop()
    return run


@dataclass
class AuditFigures:
    rollouts: int = 0
    attempts: Counter[str] = field(default_factory=Counter)
    spans: int = 0
    retried: int = 0


async def audit(store: Store, run: ChaosRun) -> AuditFigures:
    """Check the store against the side files (see the module docstring); returns counts."""
    plan, killed = run.plan, run.killed_workers
    starts: Counter[str] = Counter()
    started_by: dict[str, str] = {}
    done_by: dict[str, str] = {}
    for path in run.log_dir.glob("agent-*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a line cut by kill -9
                continue
            if rec[0] == "start":
                starts[rec[3]] += 1
                started_by[rec[3]] = rec[1]
            elif rec[0] == "done":
                done_by[rec[3]] = rec[1]
    twice = [aid for aid, n in starts.items() if n > 1]
    assert not twice, f"{len(twice)} attempts were run twice, e.g. {twice[:3]}"

    figures = AuditFigures()
    rollouts = []
    cursor = None
    while True:
        page = await store.query_rollouts(limit=500, cursor=cursor)
        rollouts += page.items
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(r.rollout_id for r in rollouts) == [f"chaos-{i:05d}" for i in range(plan.rollouts)]
    figures.rollouts = len(rollouts)
    reads = asyncio.Semaphore(16)  # a database store answers faster to a few readers at once

    async def details(rollout_id: str) -> tuple[list, list]:
        async with reads:
            return await store.query_attempts(rollout_id), await store.get_spans(rollout_id)

    fetched = await asyncio.gather(*(details(r.rollout_id) for r in rollouts))
    for r, (attempts, spans) in zip(rollouts, fetched):
        assert r.status == RolloutStatus.SUCCEEDED, f"{r.rollout_id} is {r.status.value}"
        assert r.reward == 1.0, f"{r.rollout_id} has reward {r.reward}"
        assert [a.sequence_id for a in attempts] == list(range(1, len(attempts) + 1))
        assert r.attempt_count == len(attempts)
        succeeded = [a for a in attempts if a.status == AttemptStatus.SUCCEEDED]
        assert len(succeeded) == 1, f"{r.rollout_id}: {[(a.attempt_id, a.status.value) for a in attempts]}"
        assert succeeded[0].attempt_id == r.latest_attempt_id
        figures.retried += len(attempts) > 1
        for a in attempts:
            figures.attempts[a.status.value] += 1
            if a.attempt_id in started_by:
                assert started_by[a.attempt_id] == a.worker_id, f"attempt {a.attempt_id} ran in the wrong process"
            if a.status != AttemptStatus.SUCCEEDED:
                assert a.status == AttemptStatus.UNRESPONSIVE and a.worker_id in killed, (
                    f"{r.rollout_id}: attempt {a.attempt_id} of live runner {a.worker_id} ended {a.status.value} "
                    f"({a.error})"
                )
        figures.spans += len(spans)
        ids = Counter((s.attempt_id, s.span_id) for s in spans)
        assert all(n == 1 for n in ids.values()), f"{r.rollout_id}: duplicated spans"
        # the acknowledged spans: all spans of the succeeded attempt
        ok = succeeded[0]
        assert done_by.get(ok.attempt_id) == ok.worker_id, f"{ok.attempt_id} succeeded without its agent finishing"
        mine = [s for s in spans if s.attempt_id == ok.attempt_id]
        names = Counter(s.name for s in mine)
        assert names == {"agentbolt.rollout": 1, "agentbolt.annotation": STEPS, "agentbolt.reward": 1}, (
            f"{r.rollout_id}: succeeded attempt {ok.attempt_id} has spans {dict(names)}"
        )
        steps = sorted(s.attributes["agentbolt.annotation.chaos_step"] for s in mine if s.name == "agentbolt.annotation")
        assert steps == list(range(STEPS))

    stats = await store.stats()
    assert stats.total_rollouts == plan.rollouts
    assert stats.rollouts_by_status.get("succeeded") == plan.rollouts
    assert sum(stats.rollouts_by_status.values()) == plan.rollouts
    assert stats.queue_depth == 0
    assert stats.total_attempts == sum(figures.attempts.values()) == sum(stats.attempts_by_status.values())
    assert {k: v for k, v in stats.attempts_by_status.items() if v} == dict(figures.attempts)
    assert stats.total_spans == figures.spans
    return figures
