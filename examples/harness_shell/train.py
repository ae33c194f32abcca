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
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "calc"))

from task import heldout_set, train_set  # noqa: E402  (examples/calc's word problems)

import agentbolt  # noqa: E402
from agentbolt.algorithms import GRPO, GRPOConfig, GRPOResult, LoraSettings  # noqa: E402
from agentbolt.controller import Harness, Limits, Sandbox  # noqa: E402

COMMAND = ["sh", str(HERE / "agent.sh"), "{question}"]
EVALUATOR = [sys.executable, str(HERE / "grade.py"), "--expected", "{answer}"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="one tiny step: checks the whole path")
    p.add_argument("--steps", type=int, default=40, help="most policy updates (the time budget usually ends first)")
    p.add_argument("--minutes", type=float, default=29.0,
                   help="training time budget: no step starts after it (evaluations and the last step come on top)")
    p.add_argument("--tasks-per-step", type=int, default=4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--train-size", type=int, default=400)
    p.add_argument("--val-size", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32, help="per model call (the agent asks for this many)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of the engine (1: a shared or pinned core)")
    p.add_argument("--batch", type=int, default=32, help="engine batch size")
    p.add_argument("--runners", type=int, default=1, help="runner processes")
    p.add_argument("--concurrency", type=int, default=32, help="agents at once per runner process")
    p.add_argument("--run-dir", default="runs/harness_shell")
    p.add_argument("--fresh", action="store_true", help="delete --run-dir first instead of resuming")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 5.0, 2, 2
        args.train_size, args.val_size, args.max_tokens, args.concurrency = 4, 2, 16, 4
    return args


def build_trainer(args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    from agentbolt.gateway import EngineSpec, GatewayConfig, GatewaySpec

    config = GRPOConfig(
        max_steps=args.steps, time_budget_s=args.minutes * 60, tasks_per_step=args.tasks_per_step,
        group_size=args.group_size, learning_rate=args.lr, lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r),
        micro_batch_tokens=2048, run_dir=str(run_dir / "grpo"), seed=args.seed, checkpoint_every=1, eval_every=0,
    )
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
    sandbox = Sandbox(limits=Limits(memory_mb=256, processes=32, cpu_seconds=60, file_mb=16, output_mb=0.1))
    return Harness(
        COMMAND, evaluator=EVALUATOR, env={"AGENT_MAX_TOKENS": str(args.max_tokens)},
        timeout=300, concurrency=args.concurrency, sandbox=sandbox, name="shell-calc",
    )


STEP_KEYS = ("success_rate", "reward/mean", "calls/per_rollout", "rollouts/failed", "sandbox/events",
             "time/sample_s", "time/update_s", "time/step_s")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
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
    out = {"steps": result.steps, "wall_minutes": round(wall / 60, 2), "held_out_before": before,
           "held_out_after": after, "held_out_problems": args.val_size,
           "rollouts_per_step": args.tasks_per_step * args.group_size, "threads": args.threads,
           "sandbox_events": sum(h["sandbox/events"] or 0 for h in history),
           "load_start": [round(x, 2) for x in load_start], "load_end": [round(x, 2) for x in os.getloadavg()],
           "history": history}
    (run_dir / "summary.json").write_text(json.dumps(out, indent=2))
    curve = plot_curve(result, run_dir / "learning_curve.png")

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f} %"

    print()
    print(f"held-out success (greedy, {args.val_size} problems): {pct(before)} before -> {pct(after)} after")
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


def plot_curve(result: GRPOResult, path: Path) -> Path | None:
    """Per step: training success (sampled at T=1), mean reward and the sandbox's blocked
    attempts; the greedy held-out success before (step 0) and after (last step)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no learning_curve.png (pip install 'agentbolt[plot]')")
        return None
    steps = list(range(1, len(result.history) + 1))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, [h.get("success_rate") for h in result.history], marker="o", label="train success (T=1)")
    ax.plot(steps, [h.get("reward/mean") for h in result.history], marker=".", alpha=0.6, label="train mean reward")
    events = [h.get("sandbox/events") or 0 for h in result.history]
    ax.bar(steps, [e / 10 for e in events], width=0.3, color="red", alpha=0.5, label="sandbox events / 10")
    for x, res, name in ((0, result.before, "held-out before"), (len(steps), result.after, "held-out after")):
        if res is not None and res.success_rate is not None:
            ax.scatter([x], [res.success_rate], s=80, zorder=3, label=f"{name} (greedy)")
    ax.set(xlabel="GRPO step", ylabel="rate", ylim=(-0.02, 1.15),
           title="agent.sh (POSIX shell, sandboxed), SmolLM2-135M-Instruct, GRPO + LoRA")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
    from agentbolt.algorithms.failures import NoSuccessfulRolloutsError

    try:
        main()
    except NoSuccessfulRolloutsError as exc:  # a broken agent or setup: say what, not a traceback
        sys.exit(f"\ntraining stopped: {exc}")
