"""Acceptance script: ``Trainer.fit`` with the multi-process strategy (a server on SQLite
plus runner processes), run as its own program like a user's training script.

    python fit_multiprocess.py RUN_DIR [--rollouts N] [--runners N] [--kill-one] [--slow]

``--kill-one`` SIGKILLs a runner process in the middle of a (1 s) rollout once a fifth
of the rollouts succeeded; ``--slow`` makes every rollout take 30 s (for Ctrl-C tests). Prints
``PIDS <json>`` (server and runner pids) once the runners have registered, and
``RESULT <json>`` when ``fit`` returns.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys

from agentbolt.algorithms import Algorithm, AlgorithmContext
from agentbolt.execution import MultiProcessStrategy
from agentbolt.runner import Runner, rollout
from agentbolt.trainer import Trainer
from agentbolt.types import RolloutStatus


@rollout
async def agent(task: dict) -> float:
    await asyncio.sleep(task["sleep"])
    return 1.0


class Run(Algorithm):
    def __init__(self, n_runners: int, kill_one: bool) -> None:
        self.n_runners = n_runners
        self.kill_one = kill_one

    async def run(self, ctx: AlgorithmContext) -> dict:
        rollouts = await ctx.enqueue(ctx.train_dataset or [])
        pids = await self._announce_workers(ctx)
        killed = None
        if self.kill_one:
            killed = await self._kill_a_busy_runner(ctx, len(rollouts) // 5)
        done = await ctx.wait(rollouts, timeout=120)
        return {
            "statuses": sorted({r.status.value for r in done}),
            "succeeded": sum(r.status == RolloutStatus.SUCCEEDED for r in done),
            "retried": sum(r.attempt_count > 1 for r in done),
            "killed": killed,
            "pids": pids,
        }

    async def _announce_workers(self, ctx: AlgorithmContext) -> list[int]:
        while True:
            workers = [w for w in await ctx.store.query_workers() if w.metadata.get("kind") == "runner"]
            if len(workers) >= self.n_runners:
                pids = sorted(w.metadata["pid"] for w in workers)
                server = trainer.strategy.server.process.pid  # type: ignore[attr-defined]
                print("PIDS " + json.dumps({"server": server, "runners": pids}), flush=True)
                return pids
            await asyncio.sleep(0.05)

    async def _kill_a_busy_runner(self, ctx: AlgorithmContext, after: int) -> dict:
        while (await ctx.store.stats()).rollouts_by_status["succeeded"] < after:
            await asyncio.sleep(0.02)
        for _ in range(6000):  # a runner busy with a slow (1 s) rollout: it cannot finish before the kill
            live = await ctx.store.query_rollouts(status=[RolloutStatus.RUNNING], limit=100)
            slow = [r for r in live.items if r.input["sleep"] >= 1]
            if slow:
                break
            await asyncio.sleep(0.005)
        else:
            raise RuntimeError("no slow rollout was running: nothing to kill")
        attempt = await ctx.store.get_attempt(slow[0].rollout_id, slow[0].latest_attempt_id)
        worker = await ctx.store.get_worker(attempt.worker_id)
        os.kill(worker.metadata["pid"], signal.SIGKILL)
        return {"pid": worker.metadata["pid"], "worker": worker.worker_id}


trainer: Trainer


def sleep_of(i: int, slow: bool) -> float:
    """How long rollout ``i`` takes: 30 s with ``--slow``; else 1 s for every tenth, 0.05 s."""
    if slow:
        return 30.0
    return 1.0 if i % 10 == 0 else 0.05


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--kill-one", action="store_true")
    parser.add_argument("--slow", action="store_true")
    args = parser.parse_args()
    global trainer
    trainer = Trainer(
        algorithm=Run(args.runners, args.kill_one),
        n_runners=args.runners,
        strategy=MultiProcessStrategy(run_dir=args.run_dir),
        runner=Runner(run_fn=agent, concurrency=4, heartbeat_interval=0.5, shutdown_grace=2.0),
    )
    try:
        result = trainer.fit(train_dataset=[{"i": i, "sleep": sleep_of(i, args.slow)} for i in range(args.rollouts)])
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
        sys.exit(130)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
