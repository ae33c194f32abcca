"""The command-line options every GRPO example takes, and the ``GRPOConfig`` they give."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from agentbolt.algorithms import GRPOConfig, LoraSettings


def grpo_parser(doc: str, *, run_dir: str, max_tokens: int, minutes: float = 24.0, tasks_per_step: int = 8,
                threads: int = 2, lr: float = 3e-4, stop_success_rate: float | None = None,
                ) -> argparse.ArgumentParser:
    """A parser with the options of a GRPO example (``doc``'s first paragraph as its
    description); the keywords are the defaults that differ between examples. The example
    adds its own options and applies its ``--smoke`` sizes after parsing."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="one tiny step: checks the whole path")
    p.add_argument("--steps", type=int, default=40, help="most policy updates (the time budget usually ends first)")
    p.add_argument("--minutes", type=float, default=minutes,
                   help="training time budget: no step starts after it (evaluations excluded; the last step comes "
                        "on top)")
    p.add_argument("--stop-success-rate", type=float, default=stop_success_rate,
                   help="stop once the training success rate (sampled rollouts, never the held-out set) has been at "
                        "least this for --stop-success-steps steps in a row (GRPOConfig.stop_success_rate)")
    p.add_argument("--stop-success-steps", type=int, default=2)
    p.add_argument("--eval-every", type=int, default=0,
                   help="also evaluate the held-out set every N steps (a diagnosis: slower, not training time)")
    p.add_argument("--tasks-per-step", type=int, default=tasks_per_step)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--train-size", type=int, default=400)
    p.add_argument("--val-size", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=max_tokens, help="per model call")
    p.add_argument("--threads", type=int, default=threads, help="torch threads of the engine")
    p.add_argument("--batch", type=int, default=32, help="engine batch size")
    p.add_argument("--run-dir", default=run_dir)
    p.add_argument("--fresh", action="store_true", help="delete --run-dir first instead of resuming")
    p.add_argument("--seed", type=int, default=0)
    return p


def grpo_config(args: argparse.Namespace, run_dir: Path, **fields: Any) -> GRPOConfig:
    """GRPO as the options say: LoRA of rank ``--lora-r`` (alpha twice that), a checkpoint
    after every step (a second run resumes), held-out evaluations before and after (and
    every ``--eval-every`` steps), the early stop of ``--stop-success-rate``.
    ``fields`` are the example's own settings (``micro_batch_tokens``, ``schedule``, ...)."""
    return GRPOConfig(
        max_steps=args.steps, time_budget_s=args.minutes * 60, tasks_per_step=args.tasks_per_step,
        group_size=args.group_size, learning_rate=args.lr, lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r),
        run_dir=str(run_dir), seed=args.seed, checkpoint_every=1, eval_every=args.eval_every,
        stop_success_rate=args.stop_success_rate, stop_success_steps=args.stop_success_steps, **fields,
    )


def fresh_run_dir(args: argparse.Namespace) -> Path:
    """``--run-dir``, created; emptied first with ``--fresh`` (otherwise the run resumes)."""
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
