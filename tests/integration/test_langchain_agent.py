"""Acceptance: LangChain agents (langchain-openai's ChatOpenAI) — a tool-calling agent
and a LangGraph planner → solver graph — 32 rollouts at once in one process."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, TypedDict

import httpx
import pytest
from fakes.openai_server import FakeOpenAI
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from agentbolt.adapters import (
    MessagesAdapter,
    TripletAdapter,
    extract_model_calls,
    require_token_ids,
)
from agentbolt.runner import rollout
from agentbolt.store.memory import MemoryStore
from agentbolt.types import LLM

from .checks import (
    N_ROLLOUTS,
    check_attribution,
    check_tokens,
    run_rollouts,
    server_requests,
    task_ids,
)


@tool
def multiply(expression: str) -> str:
    """Multiply two integers written as `a*b`."""
    a, b = expression.split("*")
    return str(int(a) * int(b))


def make_tool_agent(barrier: threading.Barrier) -> Any:
    @rollout
    def calculator_agent(task: dict[str, Any], llm: LLM) -> float:
        model = ChatOpenAI(base_url=llm.endpoint, api_key=llm.api_key, model=llm.model, max_retries=0)
        model = model.bind_tools([multiply])
        messages: list[BaseMessage] = [HumanMessage(f"[{task['id']}] use the calculator: {task['a']}*{task['b']}")]
        ai = model.invoke(messages)
        barrier.wait()
        (call,) = ai.tool_calls
        messages += [ai, ToolMessage(multiply.invoke(call["args"]), tool_call_id=call["id"])]
        final = model.invoke(messages)
        return 1.0 if final.content == f"The tool returned {task['a'] * task['b']}." else 0.0

    return calculator_agent


async def test_langchain_tool_agent(store: MemoryStore, fake_openai: FakeOpenAI) -> None:
    inputs = [{"id": tid, "a": 3, "b": n} for n, tid in enumerate(task_ids("lc"))]
    rollouts = await run_rollouts(make_tool_agent(threading.Barrier(N_ROLLOUTS, timeout=30)), store, fake_openai, inputs)
    recorded = await check_attribution(store, rollouts, calls_per_rollout=2)
    assert len(server_requests(fake_openai, "lc")) == 2 * N_ROLLOUTS

    for rec in recorded:
        b = rec.rollout.input["b"]
        assert rec.rollout.reward == 1.0
        # LangChain's own ChatOpenAI spans are there, but as wrappers: each call counts once
        wrappers = [s for s in rec.spans if s.attributes.get("agentbolt.llm.wrapper")]
        assert sorted(i for w in wrappers for i in w.attributes["agentbolt.llm.wrapped_span_ids"]) == sorted(
            c.span_id for c in rec.calls
        )
        asked, answered = rec.calls
        (tool_call,) = asked.tool_calls
        assert tool_call["function"]["name"] == "multiply"
        assert json.loads(tool_call["function"]["arguments"]) == {"expression": f"3*{b}"}
        assert answered.messages[-1] == {"role": "tool", "tool_call_id": tool_call["id"], "content": str(3 * b)}
        assert answered.response_text == f"The tool returned {3 * b}."
        for call in rec.calls:
            check_tokens(fake_openai, call)

        triplets = require_token_ids(TripletAdapter().adapt(rec.spans))
        assert [t.reward for t in triplets] == [1.0, 1.0]
        assert triplets[0].prompt.tools and triplets[0].prompt.tools[0]["function"]["name"] == "multiply"
        assert triplets[0].response.message["tool_calls"][0]["id"] == tool_call["id"]

        first, _ = MessagesAdapter().adapt(rec.spans)
        assert first["tools"][0]["function"]["name"] == "multiply"
        assert first["messages"][-1]["tool_calls"][0]["function"]["name"] == "multiply"


class PlanState(TypedDict, total=False):
    task: str
    plan: str
    answer: str


def make_graph_agent(barrier: asyncio.Barrier) -> Any:
    """A LangGraph with a planner node and a solver node; no agentbolt naming: the
    agent names come from LangGraph (the node that made each call)."""

    from langgraph.graph import END, START, StateGraph

    @rollout
    async def plan_and_solve(task: dict[str, Any], llm: LLM) -> float:
        async with httpx.AsyncClient() as http:
            model = ChatOpenAI(
                base_url=llm.endpoint, api_key=llm.api_key, model=llm.model, http_async_client=http, max_retries=0
            )

            async def planner(state: PlanState) -> PlanState:
                plan = await model.ainvoke(f"{state['task']} make a plan")
                await barrier.wait()
                return {"plan": str(plan.content)}

            async def solver(state: PlanState) -> PlanState:
                return {"answer": str((await model.ainvoke(f"{state['task']} follow: {state['plan']}")).content)}

            graph = StateGraph(PlanState)
            graph.add_node("planner", planner)
            graph.add_node("solver", solver)
            graph.add_edge(START, "planner")
            graph.add_edge("planner", "solver")
            graph.add_edge("solver", END)
            out = await graph.compile().ainvoke({"task": f"[{task['id']}]"})
        return 1.0 if out["answer"].startswith(f"echo: [{task['id']}] follow") else 0.0

    return plan_and_solve


async def test_langgraph_nodes_name_the_agents(store: MemoryStore, fake_openai: FakeOpenAI) -> None:
    pytest.importorskip("langgraph", reason="LangGraph is in the dev extra (pip install langgraph)")
    inputs = [{"id": tid} for tid in task_ids("lg")]
    rollouts = await run_rollouts(make_graph_agent(asyncio.Barrier(N_ROLLOUTS)), store, fake_openai, inputs)
    recorded = await check_attribution(store, rollouts, calls_per_rollout=2)
    assert len(server_requests(fake_openai, "lg")) == 2 * N_ROLLOUTS

    for rec in recorded:
        assert rec.rollout.reward == 1.0
        assert [c.agent_name for c in extract_model_calls(rec.spans)] == ["planner", "solver"]
        (solver_call,) = [c for c in rec.calls if c.agent_name == "solver"]
        (t,) = TripletAdapter(agent_match="^solver$").adapt(rec.spans)
        assert (t.span_id, t.agent_name, t.index, t.reward) == (solver_call.span_id, "solver", 1, 1.0)
        assert t.response.token_ids == solver_call.response_token_ids
        assert t.prompt.messages == [{"role": "user", "content": f"[{rec.task_id}] follow: echo: [{rec.task_id}] make a plan"}]
