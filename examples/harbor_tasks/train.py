"""Train a one-command shell agent (``agent/agent.sh``: curl + awk) with GRPO on our Harbor tasks, in Docker.

    python examples/harbor_tasks/train.py              # SmolLM2-135M-Instruct on this machine's CPU
    python examples/harbor_tasks/train.py --smoke      # one tiny step through the same path (CI)

Each rollout is one Harbor task run as Harbor runs it: the task's environment built from
its ``environment/Dockerfile`` (``FROM agentbolt-base:host``, made here from this
machine's busybox, python3 and curl: no registry is needed) on the Docker executor, the
agent started in it with the task's instruction (it asks the model for one shell
command and runs it), then the task's ``tests/`` copied in and ``tests/test.sh`` run
inside as the verifier; the reward is what it wrote to ``/logs/verifier``. The agent
knows nothing of agentbolt beyond ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.

What runs where (``strategy="multiprocess"``): this process runs GRPO (the policy, LoRA
updates); a server process holds the store (SQLite), the gateway and the transformers
engine serving SmolLM2; runner processes claim rollouts and run each task's container.
The tasks are solved greedily before and after training.
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
sys.path[:0] = [str(HERE.parent)]  # examples/_common

from _common import fresh_run_dir, grpo_config, grpo_parser, held_out_line, plot_curve, run_main  # noqa: E402

import agentbolt  # noqa: E402
from agentbolt.algorithms import GRPO, GRPOResult  # noqa: E402
from agentbolt.tasks import harbor  # noqa: E402

COMMAND = ["sh", "/workspace/agent.sh", "{instruction}", "{workdir}"]
STEP_KEYS = ("success_rate", "reward/mean", "calls/per_rollout", "rollouts/failed", "sandbox/events",
             "time/sample_s", "time/update_s", "time/step_s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = grpo_parser(__doc__, run_dir="runs/harbor_tasks", minutes=20.0, tasks_per_step=3, threads=1, max_tokens=48)
    p.add_argument("--tasks", default=str(HERE), help="a Harbor task directory, or a directory of them")
    p.add_argument("--runners", type=int, default=1, help="runner processes")
    p.add_argument("--concurrency", type=int, default=4, help="containers at once per runner process")
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 5.0, 2, 2
        args.val_size, args.max_tokens, args.concurrency = 2, 24, 4
    return args


def build_trainer(args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    from agentbolt.engines import EngineSpec
    from agentbolt.gateway import GatewayConfig, GatewaySpec

    config = grpo_config(args, run_dir / "grpo", micro_batch_tokens=2048)
    gateway = GatewaySpec(
        engine=EngineSpec(kind="transformers", path="smollm2", num_threads=args.threads,
                          max_batch_size=args.batch, max_tokens=args.max_tokens),
        config=GatewayConfig(sampling={"train": {"temperature": 1.0, "top_p": 1.0}, "val": {"temperature": 0.0}}),
    )
    return agentbolt.Trainer(
        algorithm=GRPO(config, model="smollm2"), strategy="multiprocess", n_runners=args.runners,
        runner=agentbolt.Runner(concurrency=args.concurrency), run_dir=str(run_dir / "run"),
        store=f"sqlite:///{run_dir / 'store.db'}", gateway=gateway,
    )


def make_harness(args: argparse.Namespace, tasks: list[harbor.HarborTask]) -> harbor.HarborHarness:
    """``agent.sh`` (the workspace: ``agent/``) in each task's environment, its verifier after it."""
    from agentbolt.runner.harness import Sandbox
    from agentbolt.runner.harness.docker import DockerExecutor, build_host_base_image

    build_host_base_image()  # the tasks' FROM: this machine's busybox, python3 and curl
    executor = DockerExecutor(owner="harbor-tasks", limits=harbor.task_limits(tasks))
    harness = harbor.harbor_harness(
        tasks, COMMAND, executor=executor, sandbox=Sandbox(workspace=HERE / "agent"),
        env={"AGENT_MAX_TOKENS": str(args.max_tokens)}, concurrency=args.concurrency, name="harbor-shell",
    )
    harbor.ready(tasks, harness)  # before any claim: a missing image is one error, not N failed rollouts
    return harness


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = fresh_run_dir(args)
    import torch

    torch.set_num_threads(args.threads)
    tasks = harbor.load(args.tasks)
    inputs = harbor.docker_inputs(tasks)
    args.val_size = min(args.val_size, len(inputs))
    t0 = time.perf_counter()
    trainer = build_trainer(args, run_dir)
    result: GRPOResult = trainer.fit(make_harness(args, tasks), inputs, inputs[: args.val_size])
    wall = time.perf_counter() - t0
    history = [{k: h.get(k) for k in STEP_KEYS} for h in result.history]
    out = {"tasks": [t.name for t in tasks], "steps": result.steps, "wall_minutes": round(wall / 60, 2),
           "held_out_before": result.before.success_rate if result.before else None,
           "held_out_after": result.after.success_rate if result.after else None,
           "held_out_problems": args.val_size, "rollouts_per_step": args.tasks_per_step * args.group_size,
           "threads": args.threads, "history": history}
    (run_dir / "summary.json").write_text(json.dumps(out, indent=2))
    curve = plot_curve(result, run_dir / "learning_curve.png",
                       "agent.sh on Harbor tasks (Docker), SmolLM2-135M-Instruct, GRPO + LoRA")
    print()
    print(held_out_line(result, args.val_size))
    print(f"{result.steps} GRPO steps in {wall / 60:.1f} min (wall, with evaluations)")
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
    ran every rollout (program and verifier in the task's container) with its model calls."""
    problems = []
    for name, res in (("before", result.before), ("after", result.after)):
        if res is None or res.n_scored != args.val_size:
            problems.append(f"the held-out evaluation {name} training did not score all {args.val_size} tasks")
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
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run_main(main)
