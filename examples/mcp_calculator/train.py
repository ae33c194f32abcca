"""Train an agent whose calculator is an MCP server, with GRPO on this machine's CPU.

    python examples/mcp_calculator/train.py              # SmolLM2-135M-Instruct, GRPO + LoRA
    python examples/mcp_calculator/train.py --smoke      # the same path in a few minutes: 1 tiny step
    python examples/mcp_calculator/train.py --transport http   # one streamable-HTTP server for the run
    python examples/mcp_calculator/train.py --judge-url https://api.openai.com/v1 --judge-model gpt-4.1-mini

The agent (``mcp_task.py``) solves ``examples/calc``'s word problems by replying
``CALC(<expression>)``; the expression goes to the ``evaluate`` tool of our MCP server
(``calc_server.py``), started per rollout over stdio (``--transport stdio``, the default)
or once for the run over streamable HTTP (``--transport http``). Every tool call is an
``execute_tool`` span of its rollout. Reward: 1 for a correct answer, +0.1 when the tool
evaluated the call.

With ``--judge-url`` the reward GRPO trains on is an LLM judge's instead: a RULER group
judge (``agentbolt.rewards.judge.GroupJudge``) on that OpenAI-compatible endpoint scores
each group's trajectories against each other, told the reference answer in its rubric;
the held-out evaluation still uses the exact reward, so before/after measures the judge.

Outputs in ``--run-dir`` (default ``runs/mcp_calculator``): ``metrics.jsonl``,
``learning_curve.png``, checkpoints (a second run resumes; ``--fresh`` starts over) and
``model/``, the trained policy (LoRA merged).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # mcp_task.py, and examples/_common

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
from mcp_task import MAX_TOKENS, heldout_set, mcp_calc_agent, train_set  # noqa: E402

from agentbolt.algorithms import GRPO, GRPOResult  # noqa: E402
from agentbolt.mcp import serve_http  # noqa: E402
from agentbolt.types import JsonResource  # noqa: E402

JUDGE_RUBRIC = (
    "The task's reference answer is in the task data ('answer'). A trajectory whose final ANSWER equals it "
    "scores 1. One that called the calculator with an expression that evaluated, and answered wrongly, scores "
    "about 0.1; one that did neither scores 0."
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = grpo_parser(__doc__, run_dir="runs/mcp_calculator", max_tokens=MAX_TOKENS)
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio: a calculator server per rollout; http: one streamable-HTTP server for the run")
    p.add_argument("--judge-url", help="train on a RULER judge's scores from this OpenAI-compatible endpoint")
    p.add_argument("--judge-model", default="gpt-4.1-mini")
    args = p.parse_args(argv)
    if args.smoke:
        args.steps, args.minutes, args.tasks_per_step, args.group_size = 1, 5.0, 2, 4
        args.train_size, args.val_size, args.max_tokens = 4, 2, 16
    return args


def group_reward(args: argparse.Namespace) -> Any:
    if not args.judge_url:
        return None
    from agentbolt.rewards.judge import GroupJudge, OpenAIJudgeClient

    return GroupJudge(OpenAIJudgeClient(args.judge_model, base_url=args.judge_url), rubric=JUDGE_RUBRIC)


@contextlib.contextmanager
def calculator(args: argparse.Namespace) -> Iterator[str | None]:
    """The URL of one streamable-HTTP calculator for the run (``--transport http``), else None."""
    if args.transport != "http":
        yield None
        return
    loop = asyncio.new_event_loop()
    serving = serve_http([sys.executable, str(HERE / "calc_server.py"), "--http", "--port", "{port}"])
    server = loop.run_until_complete(serving.__aenter__())
    try:
        yield server.url
    finally:
        loop.run_until_complete(serving.__aexit__(None, None, None))
        loop.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = fresh_run_dir(args)
    t0 = time.perf_counter()
    config = grpo_config(args, run_dir, micro_batch_tokens=2048)
    with calculator(args) as url:
        trainer = in_process_trainer(GRPO(config, group_reward=group_reward(args)), args, run_dir)
        if url is not None:
            trainer.resources["mcp_url"] = JsonResource(value=url)
        result: GRPOResult = trainer.fit(mcp_calc_agent, train_set(args.train_size), heldout_set(args.val_size))
    wall = time.perf_counter() - t0
    curve = plot_curve(result, run_dir / "learning_curve.png", "MCP calculator agent, SmolLM2-135M, GRPO on CPU")
    tool_calls = [h["reward/mean"] for h in result.history if h.get("reward/mean") is not None]
    print()
    print(held_out_line(result, args.val_size))
    print(f"{result.steps} GRPO steps in {wall / 60:.1f} min (wall, with evaluations); calculator over "
          f"{args.transport}; mean training reward per step: {', '.join(f'{r:.3f}' for r in tool_calls) or 'n/a'}")
    print(f"trained model: {result.export_dir}" + (f"; curve: {curve}" if curve else ""))
    return {"steps": result.steps, "wall_minutes": wall / 60, "improvement": result.improvement,
            "before": pct(result.before.success_rate if result.before else None),
            "after": pct(result.after.success_rate if result.after else None)}


if __name__ == "__main__":
    run_main(main)
