"""Evaluate and train an unmodified program (``solve.py``) through the harness controller.

    python examples/harness_openai/train.py --smoke      # built-in calculator model, checks itself
    python examples/harness_openai/train.py              # SmolLM2-135M on this machine's CPU
    python examples/harness_openai/train.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-1.5B-Instruct

What happens: a server with the gateway starts in this process in front of the model;
``Trainer.fit`` runs the program once per task — a subprocess with ``OPENAI_BASE_URL``
pointing at its rollout's gateway URL — and ``grade.py`` scores each run. The algorithm
evaluates the validation set (temperature 0, forced by the gateway), then runs the
training set (temperature 1) and turns the recorded model calls into RL triplets:
prompt and response token ids, logprobs and the rollout's reward, the input of a policy
update. See README.md beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentbolt
from agentbolt.adapters import Triplet, TripletAdapter, extract_model_calls, to_jsonl
from agentbolt.algorithms import Algorithm, AlgorithmContext
from agentbolt.runner.harness import Harness
from agentbolt.engines import Engine, OpenAIEngine, VLLMEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.server.testing import serve_in_thread
from agentbolt.types import RolloutMode, RolloutStatus

HERE = Path(__file__).resolve().parent
PY = sys.executable

DATASET = [{"question": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in
           [(2, 3), (7, 5), (12, 30), (8, 8), (21, 13), (4, 9), (15, 27), (6, 7), (33, 44), (9, 1)]]

COMMAND = [PY, str(HERE / "solve.py"), "--question", "{question}"]
EVALUATOR = [PY, str(HERE / "grade.py"), "--expected", "{answer}"]


@dataclass
class HarnessRun:
    """What one run of :class:`EvaluateThenCollect` produced."""

    val_rewards: list[float | None]
    train_rewards: list[float | None]
    triplets: list[Triplet]
    calls_per_rollout: list[int]


class EvaluateThenCollect(Algorithm):
    """Validation pass, then a training pass whose model calls become RL triplets.
    A policy-gradient algorithm starts exactly like this, then updates the model."""

    async def run(self, ctx: AlgorithmContext) -> HarnessRun:
        val = await ctx.run_dataset(ctx.val_dataset or [], RolloutMode.VAL)
        train = await ctx.run_dataset(ctx.train_dataset or [], RolloutMode.TRAIN)
        spans, calls = [], []
        for r in train:
            if r.status != RolloutStatus.SUCCEEDED:  # failed tries are never training data
                continue
            rollout_spans = await _spans_with_model_calls(ctx, r.rollout_id)
            calls.append(len(extract_model_calls(rollout_spans)))
            spans.extend(rollout_spans)
        triplets = TripletAdapter(reward_rule="final").adapt(spans)
        return HarnessRun([r.reward for r in val], [r.reward for r in train], triplets, calls)


async def _spans_with_model_calls(ctx: AlgorithmContext, rollout_id: str, wait: float = 5.0) -> list[Any]:
    """The gateway stores its spans in the background: give the last ones a moment."""
    deadline = time.monotonic() + wait
    while True:
        spans = await ctx.store.get_spans(rollout_id, "latest")
        if extract_model_calls(spans) or time.monotonic() > deadline:
            return spans
        await asyncio.sleep(0.05)


def make_engine(base_url: str | None, model: str | None, vllm: bool) -> Engine:
    if base_url:
        return VLLMEngine(base_url, model=model) if vllm else OpenAIEngine(base_url, model=model)
    try:
        from agentbolt.engines.transformers_engine import TransformersEngine  # type: ignore[import-not-found]
        from agentbolt.models import smollm2
    except ImportError as exc:
        raise SystemExit(
            f"the local model needs agentbolt's transformers engine ({exc}); "
            "pass --base-url http://host:port/v1 for another server, or --smoke for the calculator model"
        ) from None
    return TransformersEngine.from_pretrained(str(smollm2()))


def fit(
    engine: Engine,
    command: Sequence[str],
    evaluator: Sequence[str],
    train: list[dict[str, Any]],
    val: list[dict[str, Any]],
    *,
    concurrency: int = 4,
    timeout: float = 120.0,
) -> HarnessRun:
    """Serve a store + gateway in front of ``engine`` here, and fit the harness."""
    store = agentbolt.MemoryStore()
    gateway = Gateway(engine, GatewayConfig(sampling={"train": {"temperature": 1.0}, "val": {"temperature": 0.0}}))
    with serve_in_thread(store, admin_token=secrets.token_urlsafe(16), gateway=gateway) as server_url:
        harness = Harness(command, evaluator=evaluator, server_url=server_url, timeout=timeout, concurrency=concurrency)
        trainer = agentbolt.Trainer(
            algorithm=EvaluateThenCollect(), store=store, runner=agentbolt.Runner(harness, concurrency=concurrency)
        )
        return trainer.fit(harness, train, val)


def report(run: HarnessRun, out_dir: Path) -> None:
    def mean(xs: list[float | None]) -> float:
        scored = [x for x in xs if x is not None]
        return sum(scored) / max(len(scored), 1)

    print(f"validation: {len(run.val_rewards)} rollouts, mean reward {mean(run.val_rewards):.2f}")
    print(f"training:   {len(run.train_rewards)} rollouts, mean reward {mean(run.train_rewards):.2f}")
    with_ids = sum(t.has_token_ids for t in run.triplets)
    n = to_jsonl((t.model_dump() for t in run.triplets), out_dir / "triplets.jsonl")
    print(f"model calls recorded per training rollout: {run.calls_per_rollout}")
    print(f"wrote {n} triplets ({with_ids} with token ids) to {out_dir / 'triplets.jsonl'}")


def smoke_check(run: HarnessRun, n_train: int, n_val: int, calls_per_rollout: int = 1) -> list[str]:
    problems = []
    if run.calls_per_rollout != [calls_per_rollout] * n_train:
        problems.append(f"expected {calls_per_rollout} recorded model call(s) per rollout, got {run.calls_per_rollout}")
    if run.val_rewards != [1.0] * n_val or run.train_rewards != [1.0] * n_train:
        problems.append(f"the calculator answers everything right, got rewards {run.val_rewards} / {run.train_rewards}")
    if len(run.triplets) != sum(run.calls_per_rollout) or not run.triplets:
        problems.append(f"expected one triplet per model call, got {len(run.triplets)} for {run.calls_per_rollout}")
    if not all(t.has_token_ids for t in run.triplets):
        problems.append("some triplets have no token ids")
    if any(t.reward != 1.0 for t in run.triplets):
        problems.append("triplets should carry their rollout's reward (1.0)")
    return problems


def main(
    argv: list[str] | None = None, *, command: Sequence[str] = COMMAND, what: str = "openai script", calls_per_rollout: int = 1
) -> int:
    """The command line; ``calls_per_rollout`` is what ``--smoke`` expects the program to make."""
    parser = argparse.ArgumentParser(description=f"evaluate and train an unmodified {what} through the controller")
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: SmolLM2-135M on this machine)")
    parser.add_argument("--model", help="model name to send to --base-url")
    parser.add_argument("--vllm", action="store_true", help="--base-url is vLLM: record its token ids")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", type=Path, help="folder for triplets.jsonl (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="4 tasks on the calculator model; exit 1 unless all is right")
    args = parser.parse_args(argv)
    if args.smoke:
        from calc_engine import CalcEngine

        engine: Engine = CalcEngine()
        train, val = DATASET[:2], DATASET[2:4]
    else:
        engine = make_engine(args.base_url, args.model, args.vllm)
        train, val = DATASET[:6], DATASET[6:]
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="harness-example-"))
    run = fit(engine, command, EVALUATOR, train, val, concurrency=args.concurrency)
    report(run, out_dir)
    if args.smoke:
        problems = smoke_check(run, len(train), len(val), calls_per_rollout)
        for p in problems:
            print(f"smoke check failed: {p}", file=sys.stderr)
        if problems:
            return 1
        print("smoke check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
