"""Acceptance: the two-agent example (planner + solver) — with agent_match="solver",
only the solver's calls become training data; the planner's still ran and were recorded."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from fakes.openai_server import FakeOpenAI

from agentbolt.adapters import (
    MessagesAdapter,
    TripletAdapter,
    extract_model_calls,
    require_token_ids,
)
from agentbolt.runner import Runner
from agentbolt.store.memory import MemoryStore
from agentbolt.types import LLM

from .checks import N_ROLLOUTS, check_attribution, check_tokens, task_ids

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "two_agents"


def load_example_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("two_agents_planner_solver", EXAMPLE / "planner_solver.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_agent_match_solver_yields_only_the_solvers_calls(store: MemoryStore, fake_openai: FakeOpenAI) -> None:
    example = load_example_agent()
    sampling = {"logprobs": True, "extra_body": {"return_token_ids": True}}
    await store.add_resources(
        {"llm": LLM(endpoint=str(fake_openai), model="fake-model", api_key="test", sampling_parameters=sampling)}
    )
    queued = [
        await store.enqueue_rollout({"id": tid, "question": f"[{tid}] What is {n} + 1?", "answer": n + 1})
        for n, tid in enumerate(task_ids("tw"))
    ]
    stats = await Runner(example.plan_and_solve, store=store, concurrency=N_ROLLOUTS).run(stop_when_idle=True)
    assert (stats.succeeded, stats.failed) == (N_ROLLOUTS, 0)
    rollouts = [await store.get_rollout(r.rollout_id) for r in queued]
    recorded = await check_attribution(store, rollouts, calls_per_rollout=2)
    spans = [s for rec in recorded for s in rec.spans]

    for rec in recorded:
        assert rec.rollout.reward == 0.0  # the fake model only echoes: no "=> answer"
        assert [c.agent_name for c in rec.calls] == ["planner", "solver"]

    solver_calls = {c.span_id: c for c in extract_model_calls(spans) if c.agent_name == "solver"}
    triplets = require_token_ids(TripletAdapter(agent_match="solver").adapt(spans))
    assert len(triplets) == N_ROLLOUTS
    assert {t.agent_name for t in triplets} == {"solver"}
    assert {t.span_id for t in triplets} == set(solver_calls)
    for t in triplets:
        assert t.prompt.messages is not None and t.prompt.messages[0]["content"] == example.SOLVER
        assert t.reward == 0.0 and t.index == 1
        check_tokens(fake_openai, solver_calls[t.span_id])
        assert (t.prompt.token_ids, t.response.token_ids) == (
            solver_calls[t.span_id].prompt_token_ids,
            solver_calls[t.span_id].response_token_ids,
        )

    records = MessagesAdapter(agent_match="solver").adapt(spans)
    assert len(records) == N_ROLLOUTS
    assert all(r["messages"][0]["content"] == example.SOLVER for r in records)
    planner_only = TripletAdapter(agent_match="planner").adapt(spans)
    assert {t.agent_name for t in planner_only} == {"planner"} and len(planner_only) == N_ROLLOUTS
