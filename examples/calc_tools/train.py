"""Train a function-calling agent (OpenAI Agents SDK, Responses API) with GRPO on a CPU.

    python examples/calc_tools/train.py              # SmolLM2-135M-Instruct, GRPO + LoRA
    python examples/calc_tools/train.py --smoke      # the same path, one tiny step (CI)

The agent (``tool_task.py``) is an OpenAI Agents SDK ``Agent`` with a ``calculate``
function tool, on the SDK's default model class (``OpenAIResponsesModel``): its calls
reach agentbolt's gateway at ``…/v1/responses``. The gateway templates them for SmolLM2
(the tools described in the system prompt, SmolLM2's ``<tool_call>[…]</tool_call>``
format, parser ``xlam``), parses the model's calls back into ``function_call`` items,
and records every call with its token ids; each call's prompt is the previous call's
prompt and sampled ids plus the new turns (token-exact history), so each rollout's two
calls merge into one training sample. GRPO updates a LoRA and hot-swaps it into
the engine; held-out problems are solved greedily before and after.

Outputs in ``--run-dir`` (default ``runs/calc_tools``): ``metrics.jsonl``,
``learning_curve.png``, checkpoints (a second run resumes; ``--fresh`` starts over) and
``model/`` (LoRA merged).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # tool_task.py, and examples/_common (what the GRPO examples share)

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
from tool_task import MAX_TOKENS, calc_tools_agent, heldout_set, train_set  # noqa: E402

import agentbolt  # noqa: E402
from agentbolt.algorithms import GRPO, GRPOResult  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = grpo_parser(__doc__, run_dir="runs/calc_tools", max_tokens=MAX_TOKENS).parse_args(argv)
    if args.smoke:
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 5.0, 2, 2
        args.train_size, args.val_size = 4, 2
    return args


def build_trainer(args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    """GRPO with the engine in this process; the Agents SDK's calls reach its gateway at ``/v1/responses``."""
    return in_process_trainer(GRPO(grpo_config(args, run_dir, micro_batch_tokens=4096)), args, run_dir)


def summary(result: GRPOResult, wall: float) -> dict[str, Any]:
    merge = [h["merge/rate"] for h in result.history if h.get("merge/rate") is not None]
    before = result.before.success_rate if result.before else None
    after = result.after.success_rate if result.after else None
    return {
        "steps": result.steps, "wall_minutes": wall / 60, "held_out_before": before, "held_out_after": after,
        "improvement_pp": None if result.improvement is None else 100 * result.improvement,
        "merge_rate": statistics.fmean(merge) if merge else None, "model_dir": str(result.export_dir),
        "success_curve": [h.get("success_rate") for h in result.history],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = fresh_run_dir(args)
    t0 = time.perf_counter()
    trainer = build_trainer(args, run_dir)
    result: GRPOResult = trainer.fit(calc_tools_agent, train_set(args.train_size), heldout_set(args.val_size))
    out = summary(result, time.perf_counter() - t0)
    curve = plot_curve(result, run_dir / "learning_curve.png",
                       "calc_tools: Agents SDK agent, SmolLM2-135M, GRPO + LoRA on CPU", reward=False)

    print()
    print(held_out_line(result, args.val_size))
    print(f"{out['steps']} GRPO steps in {out['wall_minutes']:.1f} min (wall, with evaluations); "
          f"merge rate {pct(out['merge_rate'])}")
    print(f"trained model: {out['model_dir']}" + (f"; curve: {curve}" if curve else ""))
    return out


if __name__ == "__main__":
    run_main(main)
