"""Train a tool-using math agent with GRPO on this machine's CPU.

    python examples/calc/train.py              # SmolLM2-135M-Instruct, ≤ 7 min of training on 2 cores
    python examples/calc/train.py --smoke      # the same path in a minute: 1 tiny step
    python examples/calc/train.py --config examples/calc/cluster.yaml   # at scale: docs/scale-out.md (untested)

The agent (``task.py``) answers word problems like "Ann buys 41 packs of 23 pens and loses
15 pens..." by calling a calculator — ``CALC(41 * 23 - 15)`` — reading the result, and
answering ``ANSWER: 928``; reward 1 for a correct answer (+0.1 for a well-formed call).
Untrained, SmolLM2-135M writes the right expression for about a third of the held-out
problems when greedy and about one in twenty when sampling at temperature 1.

What runs: the SmolLM2 weights are served in this process by agentbolt's transformers
engine behind the gateway, next to an embedded SQLite store (``runs/calc/store.db``);
runners run ``calc_agent`` on every task, the gateway records each model call with its
token ids; GRPO turns each rollout's two calls into one training sample (exact-prefix
merge), computes group advantages, updates a LoRA and hot-swaps it into the
engine. Before and after, the held-out problems are solved greedily. Training stops at
``--minutes`` of training (evaluations excluded) or earlier, once the training success
rate (the sampled rollouts', never the held-out set's) has been ≥ ``--stop-success-rate``
for ``--stop-success-steps`` steps in a row.

Settings: the flags below; ``--config FILE`` reads them from YAML (flags given win):
``cpu.yaml`` holds the defaults (this machine, as above); ``cluster.yaml`` the same
settings at cluster scale plus a ``cluster`` section — the policy trained here (under
``torchrun``), vLLM replicas behind the gateway of the server this process starts on a
PostgreSQL store, runners started elsewhere with ``agentbolt runner`` (see docs/scale-out.md).

Outputs in ``--run-dir`` (default ``runs/calc``): ``metrics.jsonl``, ``learning_curve.png``,
checkpoints (a second run resumes; ``--fresh`` starts over) and ``model/``, the trained
policy as a Hugging Face model directory (LoRA merged).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # task.py, and examples/_common (what the GRPO examples share)

from _common import (  # noqa: E402
    fresh_run_dir,
    grpo_config,
    grpo_parser,
    held_out_line,
    in_process_trainer,
    pct,
    plot_curve,
    run_main,
)
from _common.cluster import cluster_trainer, overridden  # noqa: E402
from _common.settings import load_config  # noqa: E402
from task import MAX_TOKENS, calc_agent, heldout_set, train_set  # noqa: E402

import agentbolt  # noqa: E402
from agentbolt.algorithms import GRPO, GRPOResult  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # 7 min of training, lr 6e-4 and the early stop: held-out ≥ 95 % within 8 min of training (docs/benchmarks.md)
    p = grpo_parser(__doc__, run_dir="runs/calc", max_tokens=MAX_TOKENS, minutes=7.0, lr=6e-4, stop_success_rate=0.9)
    p.add_argument("--schedule", choices=["sync", "async"], default="sync")
    p.add_argument("--config", help="YAML settings: cpu.yaml (the defaults) or cluster.yaml (docs/scale-out.md)")
    config = p.parse_known_args(argv)[0].config
    if config is not None and not Path(config).is_file():
        p.error(f"--config {config}: no such file (examples/calc/cpu.yaml and cluster.yaml are the recipe's)")
    settings = load_config(Path(config), HERE / "cpu.yaml") if config is not None else {}
    cluster = settings.pop("cluster", None)
    unknown = sorted(set(settings) - set(vars(p.parse_args([]))))
    if unknown:
        p.error(f"unknown settings {unknown} in {config}: use the flags' names")
    p.set_defaults(**settings)
    args = p.parse_args(argv)
    args.cluster = cluster
    if args.smoke:  # about a minute
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 5.0, 2, 4
        args.train_size, args.val_size, args.max_tokens = 4, 2, 16
    return args


def build_trainer(args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    """GRPO with the engine in this process (updates hot-swapped into it), or as the
    config's ``cluster`` section says."""
    config = grpo_config(args, run_dir, schedule=args.schedule, micro_batch_tokens=2048)
    if args.cluster is None:
        return in_process_trainer(GRPO(config), args, run_dir)
    # the cluster section: policy_model trained here (every rank, under torchrun), the engine's
    # replicas behind the gateway of the server this process starts, runners started elsewhere
    cluster = dict(args.cluster)
    return cluster_trainer(GRPO(overridden(config, cluster, "grpo"), model=cluster["policy_model"]), cluster, run_dir,
                           resources={"llm": agentbolt.gateway_llm(max_tokens=args.max_tokens)})


def summary(result: GRPOResult, wall: float) -> dict[str, Any]:
    merge = [h["merge/rate"] for h in result.history if h.get("merge/rate") is not None]
    per_rollout = [h["samples/per_rollout"] for h in result.history if h.get("samples/per_rollout") is not None]
    before = result.before.success_rate if result.before else None
    after = result.after.success_rate if result.after else None
    return {
        "steps": result.steps, "train_seconds": result.train_seconds, "wall_minutes": wall / 60,
        "held_out_before": before, "held_out_after": after,
        "held_out_scored": None if result.after is None else result.after.n_scored,
        "improvement_pp": None if result.improvement is None else 100 * result.improvement,
        "merge_rate": statistics.fmean(merge) if merge else None,
        "samples_per_rollout": statistics.fmean(per_rollout) if per_rollout else None,
        "model_dir": str(result.export_dir),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = fresh_run_dir(args)
    t0 = time.perf_counter()
    trainer = build_trainer(args, run_dir)
    result: GRPOResult = trainer.fit(calc_agent, train_set(args.train_size), heldout_set(args.val_size))
    out = summary(result, time.perf_counter() - t0)
    curve = plot_curve(result, run_dir / "learning_curve.png", "calc agent, SmolLM2-135M-Instruct, GRPO + LoRA on CPU")

    print()
    print(held_out_line(result, args.val_size))
    evaluations = (("before", result.before), ("after", result.after))
    scored = [f"{name} {res.n_scored}/{res.n_total}" for name, res in evaluations if res is not None]
    print(f"held-out rollouts scored: {', '.join(scored) or 'no evaluation'}")
    print(f"{out['steps']} GRPO steps: training {out['train_seconds']:.0f} s (evaluations excluded), "
          f"{out['wall_minutes']:.1f} min wall with evaluations; "
          f"merge rate {pct(out['merge_rate'])}, {out['samples_per_rollout'] or 0:.2f} samples per rollout")
    print(f"trained model: {out['model_dir']}" + (f"; curve: {curve}" if curve else ""))
    return out


if __name__ == "__main__":
    run_main(main)
