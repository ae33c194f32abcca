"""Run the planner + solver agent on a dataset and turn the solver's calls — only
the solver's — into training data: the RL samples GRPO(agent_match="solver") trains on,
per-call triplets and SFT chat records.

    python examples/two_agents/train.py                 # built-in echo model, full dataset
    python examples/two_agents/train.py --smoke         # 4 tasks, checks the result, exits 1 if wrong
    python examples/two_agents/train.py --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-1.5B-Instruct

See README.md beside this file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echo_server import serve_echo
from planner_solver import DATASET, plan_and_solve

import agentbolt
from agentbolt.adapters import (
    MessagesAdapter,
    Sample,
    SampleAdapter,
    Triplet,
    TripletAdapter,
    agent_counts,
    extract_model_calls,
    to_jsonl,
)
from agentbolt.algorithms import Algorithm, AlgorithmContext
from agentbolt.types import RolloutStatus


@dataclass
class TrainingData:
    """What :class:`CollectTrainingData` made from one pass over the dataset."""

    rewards: list[float | None]
    calls_by_agent: Counter[str]
    triplets: list[Triplet]
    sft_records: list[dict[str, Any]]
    rl_samples: list[Sample]


class CollectTrainingData(Algorithm):
    """Run the training set once and adapt the spans of the agent(s) ``agent_match``
    selects: the RL samples GRPO trains on (only the selected agents' tokens carry loss),
    triplets (each call gets its rollout's final reward) and SFT records of the calls
    whose rollout scored at least ``min_reward``. A learning algorithm (GRPO, SFT) starts
    exactly like this, then updates the model with the data."""

    def __init__(self, agent_match: str = "solver", min_reward: float = 1.0) -> None:
        self.rl = SampleAdapter(agent_match=agent_match)
        self.triplets = TripletAdapter(reward_rule="final", agent_match=agent_match)
        self.sft = MessagesAdapter(agent_match=agent_match, min_reward=min_reward)

    async def run(self, ctx: AlgorithmContext) -> TrainingData:
        rollouts = await ctx.run_dataset(ctx.train_dataset or [])
        spans = []
        for r in rollouts:
            if r.status == RolloutStatus.SUCCEEDED:  # failed tries are not training data
                spans.extend(await ctx.store.get_spans(r.rollout_id, "latest"))
        calls = Counter(c.agent_name or "(unnamed)" for c in extract_model_calls(spans))
        return TrainingData([r.reward for r in rollouts], calls, self.triplets.adapt(spans), self.sft.adapt(spans),
                            self.rl(spans))


def train(base_url: str, model: str, dataset: list[dict[str, Any]], token_ids: bool = True) -> TrainingData:
    sampling: dict[str, Any] = {"temperature": 0.7, "logprobs": True}
    if token_ids:  # vLLM returns the token ids when asked; other servers may refuse the field
        sampling["extra_body"] = {"return_token_ids": True}
    trainer = agentbolt.Trainer(
        algorithm=CollectTrainingData(agent_match="solver"),
        n_runners=1,
        resources={"llm": agentbolt.LLM(endpoint=base_url, model=model, api_key="none", sampling_parameters=sampling)},
    )
    return trainer.fit(plan_and_solve, dataset)


def report(data: TrainingData, out_dir: Path) -> None:
    scored = [r for r in data.rewards if r is not None]
    print(f"rollouts: {len(data.rewards)}, mean reward: {sum(scored) / max(len(scored), 1):.2f}")
    print("model calls by agent: " + ", ".join(f"{a}={n}" for a, n in sorted(data.calls_by_agent.items())))
    agents = Counter(t.agent_name for t in data.triplets)
    with_ids = sum(t.has_token_ids for t in data.triplets)
    print(f"triplets (agent_match='solver'): {len(data.triplets)} — agents {dict(agents)}, {with_ids} with token ids")
    trained = {a: c["tokens_trained"] for a, c in sorted(agent_counts(data.rl_samples).items())}
    print(f"RL samples (what GRPO(agent_match='solver') trains on): {len(data.rl_samples)} — tokens trained "
          f"by agent {trained}")
    to_jsonl((s.as_dict() for s in data.rl_samples), out_dir / "solver_rl_samples.jsonl")
    n_triplets = to_jsonl((t.model_dump() for t in data.triplets), out_dir / "solver_triplets.jsonl")
    n_records = to_jsonl(data.sft_records, out_dir / "solver_sft.jsonl")
    print(f"wrote {n_triplets} triplets and {n_records} SFT records (reward = 1) to {out_dir}")


def smoke_check(data: TrainingData, n_tasks: int) -> list[str]:
    """What is wrong with a smoke run's result (nothing, when all is well)."""
    problems = []
    if data.calls_by_agent != Counter({"planner": n_tasks, "solver": n_tasks}):
        problems.append(f"expected one planner and one solver call per task, got {dict(data.calls_by_agent)}")
    if len(data.triplets) != n_tasks or any(t.agent_name != "solver" for t in data.triplets):
        problems.append(f"expected {n_tasks} solver-only triplets, got {[t.agent_name for t in data.triplets]}")
    if not all(t.has_token_ids for t in data.triplets):
        problems.append("some triplets have no token ids")
    trained_agents = {c.agent_name for s in data.rl_samples for c in s.calls if c.trained}
    if trained_agents != {"solver"} or len(data.rl_samples) != n_tasks:
        problems.append(f"expected {n_tasks} RL samples training only the solver, got {len(data.rl_samples)} "
                        f"training {sorted(map(str, trained_agents))}")
    if any(r is None for r in data.rewards):
        problems.append("some rollouts have no reward")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="planner + solver: collect the solver's training data")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: start the built-in echo model)")
    parser.add_argument("--model", default="echo", help="model name to request (default: echo)")
    parser.add_argument("--no-token-ids", action="store_true", help="do not ask the server for token ids")
    parser.add_argument("--out", type=Path, help="folder for the JSONL files (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="4 tasks on the echo model; exit 1 unless all is right")
    args = parser.parse_args(argv)
    dataset = DATASET[:4] if args.smoke else DATASET
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="two-agents-"))

    if args.base_url:
        data = train(args.base_url, args.model, dataset, token_ids=not args.no_token_ids)
    else:
        with serve_echo() as base_url:
            data = train(base_url, args.model, dataset, token_ids=not args.no_token_ids)
    report(data, out_dir)
    if args.smoke:
        problems = smoke_check(data, len(dataset))
        for p in problems:
            print(f"smoke check failed: {p}", file=sys.stderr)
        if problems:
            return 1
        print("smoke check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
