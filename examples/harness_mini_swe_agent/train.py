"""Train mini-SWE-agent, unmodified, with GRPO on generated small repo tasks, sandboxed.

    scripts/install_harnesses mini-swe-agent                   # once: mini-swe-agent 2.4.6 from PyPI
    python examples/harness_mini_swe_agent/train.py            # SmolLM2-135M-Instruct on this machine's CPU
    python examples/harness_mini_swe_agent/train.py --smoke    # one tiny step through the same path (CI)

The agent is mini-SWE-agent 2.4.6 as installed from PyPI, run per rollout through its
harness profile (``Harness.for_("mini-swe-agent", ...)``: its own config in a fresh HOME,
its bash tool, litellm pointed at the gateway). Each task is a tiny repo with a failing
test (fix a constant, rename a function, create a file; ``repo_tasks.py``); ``grade.py`` runs
the repo's tests on the workspace the agent left. Held-out repos come from other seeds.

What runs where (``strategy="multiprocess"``): this process runs GRPO (the policy, LoRA
updates); a server process holds the store (SQLite), the gateway and the transformers
engine serving SmolLM2; runner processes claim rollouts and start mini-SWE-agent in its
own sandbox per rollout, then run ``grade.py``. Held-out tasks are solved greedily before
and after training.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # repo_tasks.py, examples/_common

from _common import fresh_run_dir, grpo_config, grpo_parser, held_out_line, plot_curve, run_main  # noqa: E402
from repo_tasks import make_tasks  # noqa: E402

import agentbolt  # noqa: E402
from agentbolt.algorithms import GRPO, GRPOResult  # noqa: E402
from agentbolt.runner.harness import Harness, Limits, Sandbox  # noqa: E402
from agentbolt.runner.harness.profiles import MiniSweAgent  # noqa: E402

EVALUATOR = [sys.executable, str(HERE / "grade.py")]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = grpo_parser(__doc__, run_dir="runs/harness_mini_swe_agent", minutes=45.0, tasks_per_step=4, threads=1,
                    max_tokens=96)  # the engine's cut per call (mini-SWE-agent sends none)
    p.add_argument("--runners", type=int, default=1, help="runner processes")
    p.add_argument("--concurrency", type=int, default=8, help="agents at once per runner process")
    p.add_argument("--agent-steps", type=int, default=3, help="most model calls per episode (mini's step_limit)")
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 10.0, 2, 2
        args.train_size, args.val_size, args.max_tokens, args.concurrency, args.agent_steps = 4, 2, 16, 4, 1
    return args


def build_trainer(args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    from agentbolt.engines import EngineSpec
    from agentbolt.gateway import GatewayConfig, GatewaySpec

    config = grpo_config(args, run_dir / "grpo", micro_batch_tokens=2048)
    # the engine lives in the server process: the per-mode sampling GRPO needs is set here
    gateway = GatewaySpec(
        engine=EngineSpec(kind="transformers", path="smollm2", num_threads=args.threads,
                          max_batch_size=args.batch, max_tokens=args.max_tokens, context_length=8192),
        config=GatewayConfig(sampling={"train": {"temperature": 1.0, "top_p": 1.0}, "val": {"temperature": 0.0}}),
    )
    return agentbolt.Trainer(
        algorithm=GRPO(config, model="smollm2"), strategy="multiprocess", n_runners=args.runners,
        runner=agentbolt.Runner(concurrency=args.concurrency), run_dir=str(run_dir / "run"),
        store=f"sqlite:///{run_dir / 'store.db'}", gateway=gateway,
    )


def make_harness(args: argparse.Namespace) -> Harness:
    sandbox = Sandbox(task_workspace_field="repo", limits=Limits(processes=32, cpu_seconds=300, file_mb=16))
    return Harness.for_(
        MiniSweAgent(step_limit=args.agent_steps, command_timeout=20), task="{problem}", model="smollm2",
        evaluator=EVALUATOR, timeout=600, concurrency=args.concurrency, sandbox=sandbox,
    )


STEP_KEYS = ("success_rate", "reward/mean", "calls/per_rollout", "rollouts/failed", "sandbox/events",
             "time/sample_s", "time/update_s", "time/step_s")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = fresh_run_dir(args)
    import torch

    torch.set_num_threads(args.threads)  # the policy update in this process, like the engine
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    trainer = build_trainer(args, run_dir)
    tasks = run_dir / "tasks"
    train = make_tasks(tasks, args.train_size, args.seed, "train")
    heldout = make_tasks(tasks, args.val_size, args.seed, "heldout")
    result: GRPOResult = trainer.fit(make_harness(args), train, heldout)
    wall = time.perf_counter() - t0
    before = result.before.success_rate if result.before else None
    after = result.after.success_rate if result.after else None
    history = [{k: h.get(k) for k in STEP_KEYS} for h in result.history]
    events = [h["sandbox/events"] or 0 for h in history]
    out = {"steps": result.steps, "wall_minutes": round(wall / 60, 2), "held_out_before": before,
           "held_out_after": after, "held_out_problems": args.val_size,
           "rollouts_per_step": args.tasks_per_step * args.group_size, "threads": args.threads,
           "sandbox_events": sum(events),
           "load_start": [round(x, 2) for x in load_start], "load_end": [round(x, 2) for x in os.getloadavg()],
           "history": history}
    (run_dir / "summary.json").write_text(json.dumps(out, indent=2))
    curve = plot_curve(result, run_dir / "learning_curve.png",
                       "mini-SWE-agent 2.4.6 (unmodified, sandboxed), SmolLM2-135M-Instruct, GRPO + LoRA",
                       bars=("sandbox events / 10", [e / 10 for e in events]))

    print()
    print(held_out_line(result, args.val_size))
    print(f"{result.steps} GRPO steps in {wall / 60:.1f} min (wall, with evaluations); "
          f"sandbox events per step: {[h['sandbox/events'] for h in history]}")
    print(f"summary: {run_dir / 'summary.json'}" + (f", curve: {curve}" if curve else ""))
    if args.smoke:
        problems = smoke_problems(result, args)
        for problem in problems:
            print(f"smoke check failed: {problem}", file=sys.stderr)
        if problems:
            raise SystemExit(1)
        print("smoke check passed")
    return out


def smoke_problems(result: GRPOResult, args: argparse.Namespace) -> list[str]:
    """What a smoke run must show: both evaluations scored every held-out task, the step
    ran every rollout of mini-SWE-agent through the sandbox with its model calls."""
    problems = []
    for name, res in (("before", result.before), ("after", result.after)):
        if res is None or res.n_scored != args.val_size:
            problems.append(f"the held-out evaluation {name} training did not score all {args.val_size} problems")
    if result.steps != 1 or not result.history:
        problems.append(f"expected 1 GRPO step, got {result.steps}")
    else:
        step = result.history[0]
        if step.get("rollouts/total") != args.tasks_per_step * args.group_size or step.get("rollouts/failed"):
            problems.append(f"the step's rollouts did not all succeed: {step}")
        if not step.get("calls/per_rollout"):
            problems.append("no model call was recorded for the step's rollouts")
    return problems


if __name__ == "__main__":
    run_main(main)
