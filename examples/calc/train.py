"""Train a tool-using math agent with GRPO on this machine's CPU.

    python examples/calc/train.py              # SmolLM2-135M-Instruct, ~30 min on 2 cores
    python examples/calc/train.py --smoke      # the same path in a minute: 1 tiny step

The agent (``task.py``) answers word problems like "Ann buys 41 packs of 23 pens and loses
15 pens..." by calling a calculator — ``CALC(41 * 23 - 15)`` — reading the result, and
answering ``ANSWER: 928``; reward 1 for a correct answer (+0.1 for a well-formed call).
Untrained, SmolLM2-135M writes the right expression for about a third of the held-out
problems when greedy and about one in twenty when sampling at temperature 1.

What runs: the SmolLM2 weights are served in this process by agentbolt's transformers
engine behind the gateway, next to an embedded SQLite store (``runs/calc/store.db``);
runners run ``calc_agent`` on every task, the gateway records each model call with its
token ids; GRPO turns each rollout's two calls into one training sample (exact-prefix
merge), computes group advantages, updates a LoRA adapter and hot-swaps it into the
engine. Before and after, the held-out problems are solved greedily.

Outputs in ``--run-dir`` (default ``runs/calc``): ``metrics.jsonl``, ``learning_curve.png``,
checkpoints (a second run resumes; ``--fresh`` starts over) and ``model/``, the trained
policy as a Hugging Face model directory (LoRA merged).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import agentbolt  # noqa: E402
from agentbolt.algorithms import GRPO, GRPOConfig, GRPOResult, LoraSettings  # noqa: E402
from task import MAX_TOKENS, calc_agent, heldout_set, train_set  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="one tiny step: checks the whole path in about a minute")
    p.add_argument("--steps", type=int, default=40, help="most policy updates (the time budget usually ends first)")
    p.add_argument("--minutes", type=float, default=24.0, help="training time budget; evaluations come on top")
    p.add_argument("--tasks-per-step", type=int, default=8)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--train-size", type=int, default=400)
    p.add_argument("--val-size", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="per model call")
    p.add_argument("--threads", type=int, default=2, help="torch threads of the engine")
    p.add_argument("--batch", type=int, default=32, help="engine batch size")
    p.add_argument("--schedule", choices=["sync", "async"], default="sync")
    p.add_argument("--run-dir", default="runs/calc")
    p.add_argument("--fresh", action="store_true", help="delete --run-dir first instead of resuming")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 5.0, 2, 4
        args.train_size, args.val_size, args.max_tokens = 4, 2, 16
    return args


def build_trainer(args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    import torch

    from agentbolt.gateway import Gateway
    from agentbolt.gateway.transformers_engine import TransformersEngine
    from agentbolt.models import smollm2

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    engine = TransformersEngine.from_pretrained(smollm2(), num_threads=args.threads,
                                                max_batch_size=args.batch, default_max_tokens=args.max_tokens)
    config = GRPOConfig(
        max_steps=args.steps, time_budget_s=args.minutes * 60, tasks_per_step=args.tasks_per_step,
        group_size=args.group_size, schedule=args.schedule, learning_rate=args.lr,
        lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r), micro_batch_tokens=2048,
        run_dir=str(run_dir), seed=args.seed, checkpoint_every=1, eval_every=0,
    )
    llm = agentbolt.gateway_llm(max_tokens=args.max_tokens)  # each attempt gets its own gateway URL
    return agentbolt.Trainer(
        algorithm=GRPO(config), n_runners=1,
        runner=agentbolt.Runner(concurrency=args.tasks_per_step * args.group_size),
        store=f"sqlite:///{run_dir / 'store.db'}", gateway=Gateway(engine), resources={"llm": llm},
    )


def plot_curve(result: GRPOResult, path: Path) -> Path | None:
    """Training success rate and mean reward per step, with the held-out results."""
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
    for x, res, name in ((0, result.before, "held-out before"), (len(steps), result.after, "held-out after")):
        if res is not None and res.success_rate is not None:
            ax.scatter([x], [res.success_rate], s=80, zorder=3, label=f"{name} (greedy)")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("rate")
    ax.set_ylim(-0.02, 1.15)  # the reward goes up to 1.1
    ax.set_title("calc agent, SmolLM2-135M-Instruct, GRPO + LoRA on CPU")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def summary(result: GRPOResult, wall: float) -> dict[str, Any]:
    merge = [h["merge/rate"] for h in result.history if h.get("merge/rate") is not None]
    per_rollout = [h["samples/per_rollout"] for h in result.history if h.get("samples/per_rollout") is not None]
    before = result.before.success_rate if result.before else None
    after = result.after.success_rate if result.after else None
    return {
        "steps": result.steps, "wall_minutes": wall / 60, "held_out_before": before, "held_out_after": after,
        "held_out_scored": None if result.after is None else result.after.n_scored,
        "improvement_pp": None if result.improvement is None else 100 * result.improvement,
        "merge_rate": statistics.fmean(merge) if merge else None,
        "samples_per_rollout": statistics.fmean(per_rollout) if per_rollout else None,
        "model_dir": str(result.export_dir),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    trainer = build_trainer(args, run_dir)
    result: GRPOResult = trainer.fit(calc_agent, train_set(args.train_size), heldout_set(args.val_size))
    out = summary(result, time.perf_counter() - t0)
    curve = plot_curve(result, run_dir / "learning_curve.png")

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f} %"

    print()
    print(f"held-out success (greedy, {args.val_size} problems): {pct(out['held_out_before'])} before -> "
          f"{pct(out['held_out_after'])} after  ({out['improvement_pp'] or 0:+.1f} points)")
    scored = [f"{name} {res.n_scored}/{res.n_total}" for name, res in (("before", result.before), ("after", result.after))
              if res is not None]
    print(f"held-out rollouts scored: {', '.join(scored) or 'no evaluation'}")
    print(f"{out['steps']} GRPO steps in {out['wall_minutes']:.1f} min (wall, with evaluations); "
          f"merge rate {pct(out['merge_rate'])}, {out['samples_per_rollout'] or 0:.2f} samples per rollout")
    print(f"trained model: {out['model_dir']}" + (f"; curve: {curve}" if curve else ""))
    return out


if __name__ == "__main__":
    from agentbolt.algorithms.failures import NoSuccessfulRolloutsError

    try:
        main()
    except NoSuccessfulRolloutsError as exc:  # a broken agent or setup: say what, not a traceback
        sys.exit(f"\ntraining stopped: {exc}")
