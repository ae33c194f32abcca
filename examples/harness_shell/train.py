"""Train an unmodified POSIX shell agent (``agent.sh``: curl + awk) with GRPO, in a sandbox.

    python examples/harness_shell/train.py              # SmolLM2-135M-Instruct on this machine's CPU
    python examples/harness_shell/train.py --smoke      # one tiny step through the same path (CI)

The agent is a shell script that knows nothing of agentbolt beyond ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``: it asks the model for ``CALC(<expression>)``, computes it with its own
calculator tool (awk), sends the result back and prints the model's ``ANSWER``; ``grade.py``
scores that output (1 for the right answer, +0.1 for a well-formed call). The word
problems are those of ``examples/calc``.

What runs where (``strategy="multiprocess"``): this process runs GRPO (the policy, LoRA
updates); a server process holds the store (SQLite), the gateway and the transformers
engine serving SmolLM2, and receives each update's weights over HTTP; runner processes
claim rollouts and start ``sh agent.sh {question}`` once per rollout, each in its own
sandbox (a fresh workspace, the gateway and nothing else), then run ``grade.py`` on its
output. Held-out problems are solved greedily before and after training.
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
sys.path[:0] = [str(HERE.parent / "calc"), str(HERE.parent)]  # examples/calc's word problems, examples/_common

from _common import fresh_run_dir, grpo_config, grpo_parser, held_out_line, plot_curve, run_main  # noqa: E402
from task import heldout_set, train_set  # noqa: E402

import agentbolt  # noqa: E402
from agentbolt.algorithms import GRPO, GRPOResult  # noqa: E402
from agentbolt.runner.harness import Harness, Limits, Sandbox  # noqa: E402

COMMAND = ["sh", str(HERE / "agent.sh"), "{question}"]
EVALUATOR = [sys.executable, str(HERE / "grade.py"), "--expected", "{answer}"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = grpo_parser(__doc__, run_dir="runs/harness_shell", minutes=29.0, tasks_per_step=4, threads=1,
                    max_tokens=32)  # the agent asks for --max-tokens; one torch thread: a shared or pinned core
    p.add_argument("--runners", type=int, default=1, help="runner processes")
    p.add_argument("--concurrency", type=int, default=32, help="agents at once per runner process")
    p.add_argument("--executor", choices=("bubblewrap", "docker"), default="bubblewrap",
                   help="where agent.sh runs: a bubblewrap sandbox, or a Docker container (DockerExecutor)")
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 5.0, 2, 2
        args.train_size, args.val_size, args.max_tokens, args.concurrency = 4, 2, 16, 4
    return args


def build_trainer(args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    from agentbolt.engines import EngineSpec
    from agentbolt.gateway import GatewayConfig, GatewaySpec

    config = grpo_config(args, run_dir / "grpo", micro_batch_tokens=2048)
    # the engine lives in the server process: the per-mode sampling GRPO needs is set here
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


def make_harness(args: argparse.Namespace) -> Harness:
    if args.executor == "docker":
        return make_docker_harness(args)
    sandbox = Sandbox(limits=Limits(memory_mb=256, processes=32, cpu_seconds=60, file_mb=16, output_mb=0.1))
    return Harness(
        COMMAND, evaluator=EVALUATOR, env={"AGENT_MAX_TOKENS": str(args.max_tokens)},
        timeout=300, concurrency=args.concurrency, sandbox=sandbox, name="shell-calc",
    )


def make_docker_harness(args: argparse.Namespace) -> Harness:
    """``agent.sh`` in a container of an image made from this machine's busybox, python3
    and curl (no registry needed); the workspace is this directory without the grader;
    ``grade.py`` scores the output here, outside the container."""
    from agentbolt.runner.harness.docker import ContainerLimits, DockerExecutor, build_host_base_image

    executor = DockerExecutor(build_host_base_image(), owner="harness-shell", limits=ContainerLimits(
        memory_mb=256, cpus=1.0, processes=32, tmp_mb=64, output_mb=0.1))
    executor.check_ready()  # before any claim: a missing image is one error, not N failed rollouts
    workspace = Sandbox(workspace=HERE, hidden=("grade.py", "train.py", "README.md", "__pycache__", "runs"))
    return Harness(
        ["sh", "agent.sh", "{question}"], evaluator=EVALUATOR, env={"AGENT_MAX_TOKENS": str(args.max_tokens)},
        timeout=300, concurrency=args.concurrency, sandbox=workspace, executor=executor, name="shell-calc",
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
    result: GRPOResult = trainer.fit(make_harness(args), train_set(args.train_size), heldout_set(args.val_size))
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
                       "agent.sh (POSIX shell, sandboxed), SmolLM2-135M-Instruct, GRPO + LoRA",
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
    """What a smoke run must show: both evaluations scored every held-out problem, the
    step ran every rollout through the sandbox with its model calls, nothing was blocked."""
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
        if step.get("sandbox/events") != 0:
            problems.append(f"the honest agent's sandbox blocked something: {step}")
    return problems


if __name__ == "__main__":
    run_main(main)
