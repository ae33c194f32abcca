"""Acceptance: in a two-agent system whose model calls go through agentbolt's gateway (the
path that trains), ``agent_match`` selects exactly the named agent's calls — for an
explicit ``agentbolt.agent(...)``, LangGraph nodes, the OpenAI Agents SDK and AutoGen
AgentChat (through its OpenInference instrumentor). The tracer names the agent to the
gateway (``X-Agentbolt-Agent`` + ``traceparent``), and the two spans of each call (client
and gateway) become one call that keeps the name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict

import openai
import pytest
from fakes.openai_server import FakeOpenAI, serve_fake_openai

import agentbolt
from agentbolt.adapters import SampleAdapter, TripletAdapter, extract_model_calls
from agentbolt.algorithms.evaluate import Evaluate
from agentbolt.engines import EngineSpec
from agentbolt.gateway import GatewayConfig, GatewaySpec
from agentbolt.semconv import GATEWAY_SCOPE as SCOPE_NAME
from agentbolt.runner import gateway_llm
from agentbolt.store.memory import MemoryStore
from agentbolt.trainer import Trainer
from agentbolt.types import LLM, Span

TASKS = [{"id": f"t{i}"} for i in range(3)]


@pytest.fixture(scope="module")
def engine() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as url:
        yield url


async def run_through_gateway(agent: Any, engine: FakeOpenAI) -> list[list[Span]]:
    """Run ``agent`` on TASKS with its calls through a gateway (fake vLLM behind it);
    the spans of each rollout's attempt."""
    store = MemoryStore()
    gateway = GatewaySpec(engine=EngineSpec(kind="vllm", url=engine), config=GatewayConfig(span_flush_interval=0.01))
    trainer = Trainer(algorithm=Evaluate(show=False), store=store, gateway=gateway, resources={"llm": gateway_llm()})
    result = await trainer.fit_async(agent, TASKS)
    assert [r.reward for r in result.rows] == [1.0] * len(TASKS), [r.error for r in result.rows]
    return [await store.get_spans(row.rollout_id, "latest") for row in result.rows]


def check_selection(spans: list[Span], *, header_names: bool = True) -> None:
    """Both agents called once through the gateway; agent_match keeps exactly one call each."""
    gateway_spans = [s for s in spans if s.attributes.get("otel.scope.name") == SCOPE_NAME]
    assert len(gateway_spans) == 2
    if header_names:  # the tracer's header reached the gateway
        assert sorted(s.attributes.get("agentbolt.agent.name") for s in gateway_spans) == ["planner", "solver"]
    # the gateway span joined the agent's trace, as a child of the client's span
    ids = {s.span_id for s in spans}
    assert all(s.parent_id in ids and s.trace_id == spans[0].trace_id for s in gateway_spans)
    calls = extract_model_calls(spans)
    assert [c.attributes.get("otel.scope.name") for c in calls] == [SCOPE_NAME, SCOPE_NAME]  # one per call
    assert [c.agent_name for c in calls] == ["planner", "solver"]
    for name in ("planner", "solver"):
        (t,) = TripletAdapter(agent_match=f"^{name}$").adapt(spans)
        assert t.agent_name == name and t.span_id in {s.span_id for s in gateway_spans}
        (found,) = SampleAdapter(agent_match=f"^{name}$").adapt(spans)
        trained = [c for s in found.samples for c in s.calls if c.trained]
        assert [(c.agent_name, c.span_id) for c in trained] == [(name, t.span_id)]


@agentbolt.rollout
async def explicit_agents(task: dict[str, Any], llm: LLM) -> float:
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key, max_retries=0)
    async with client:
        with agentbolt.agent("planner"):
            plan = await client.chat.completions.create(
                model=llm.model, messages=[{"role": "user", "content": f"[{task['id']}] plan"}])
        with agentbolt.agent("solver"):
            answer = await client.chat.completions.create(
                model=llm.model, messages=[{"role": "user", "content": f"solve {plan.choices[0].message.content}"}])
    return 1.0 if (answer.choices[0].message.content or "").startswith("echo: solve") else 0.0


async def test_explicit_agent_names_reach_the_gateway(engine: FakeOpenAI) -> None:
    for spans in await run_through_gateway(explicit_agents, engine):
        check_selection(spans)


class State(TypedDict, total=False):
    task: str
    plan: str
    answer: str


@agentbolt.rollout
async def langgraph_agents(task: dict[str, Any], llm: LLM) -> float:
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, StateGraph

    model = ChatOpenAI(base_url=llm.endpoint, api_key=llm.api_key, model=llm.model, max_retries=0)

    async def planner(state: State) -> State:
        return {"plan": str((await model.ainvoke(f"[{state['task']}] plan")).content)}

    async def solver(state: State) -> State:
        return {"answer": str((await model.ainvoke(f"solve {state['plan']}")).content)}

    graph = StateGraph(State)
    graph.add_node("planner", planner)
    graph.add_node("solver", solver)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "solver")
    graph.add_edge("solver", END)
    out = await graph.compile().ainvoke({"task": task["id"]})
    return 1.0 if out["answer"].startswith("echo: solve") else 0.0


async def test_langgraph_node_names_reach_the_gateway(engine: FakeOpenAI) -> None:
    pytest.importorskip("langgraph")
    for spans in await run_through_gateway(langgraph_agents, engine):
        check_selection(spans)


@agentbolt.rollout
async def openai_agents_sdk(task: dict[str, Any], llm: LLM) -> float:
    from agents import Agent, OpenAIChatCompletionsModel, Runner

    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key, max_retries=0)
    model = OpenAIChatCompletionsModel(model=llm.model, openai_client=client)
    planner = Agent(name="planner", instructions="Write a plan.", model=model)
    solver = Agent(name="solver", instructions="Follow the plan.", model=model)
    plan = await Runner.run(planner, f"[{task['id']}] plan")
    answer = await Runner.run(solver, f"solve {plan.final_output}")
    return 1.0 if str(answer.final_output).startswith("echo: solve") else 0.0


async def test_openai_agents_sdk_agent_names_reach_the_gateway_span(engine: FakeOpenAI) -> None:
    pytest.importorskip("agents", reason="the OpenAI Agents SDK is in the dev extra (pip install openai-agents)")
    pytest.importorskip("openinference.instrumentation.openai_agents")
    from agents import set_tracing_disabled

    set_tracing_disabled(False)  # other tests switch the SDK's tracing off; its instrumentor reads that trace
    for spans in await run_through_gateway(openai_agents_sdk, engine):
        # the SDK names its agent spans only when they end: the name comes from the
        # gateway span's ancestors (traceparent) and its client twin, not the header
        check_selection(spans, header_names=False)


@agentbolt.rollout
async def autogen_agents(task: dict[str, Any], llm: LLM) -> float:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.models import ModelInfo
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    info = ModelInfo(vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False)
    client = OpenAIChatCompletionClient(model=llm.model, base_url=llm.endpoint, api_key=llm.api_key or "none",
                                        model_info=info, max_retries=0)
    try:
        planner = AssistantAgent("planner", model_client=client, system_message="Write a plan.")
        solver = AssistantAgent("solver", model_client=client, system_message="Follow the plan.")
        plan = (await planner.run(task=f"[{task['id']}] plan")).messages[-1].content
        answer = (await solver.run(task=f"solve {plan}")).messages[-1].content
    finally:
        await client.close()
    return 1.0 if str(answer).startswith("echo: solve") else 0.0


async def test_autogen_agent_names_reach_the_gateway_span(engine: FakeOpenAI) -> None:
    pytest.importorskip("autogen_agentchat", reason="AutoGen AgentChat is not installed: see docs/frameworks.md")
    pytest.importorskip("openinference.instrumentation.autogen_agentchat")
    for spans in await run_through_gateway(autogen_agents, engine):
        check_selection(spans, header_names=False)
