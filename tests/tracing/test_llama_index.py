"""LlamaIndex's workflow agents name their model calls: each ``run_agent_step`` runs in
an ``invoke_agent <name>`` span with ``gen_ai.agent.name``, of a single agent and of an
``AgentWorkflow``'s agents; a name set with ``agentbolt.agent`` still wins."""

from __future__ import annotations

from typing import Any

import pytest
from fakes.openai_server import FakeOpenAI

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import Tracer, agent

from .recording import claim, named, stored_spans

pytest.importorskip("llama_index.llms.openai_like")


def function_agent(name: str, base_url: str) -> Any:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(
        model="fake-model", api_base=base_url, api_key="test", is_chat_model=True, is_function_calling_model=True
    )
    return FunctionAgent(name=name, description=f"the {name}", tools=[], llm=llm)


async def test_each_llama_index_agent_names_its_model_calls(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    from llama_index.core.agent.workflow import AgentWorkflow

    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        alone = await function_agent("reader", fake_openai).run(user_msg="hello reader")
        workflow = AgentWorkflow(agents=[function_agent("writer", fake_openai)], root_agent="writer")
        in_workflow = await workflow.run(user_msg="hello writer")
        with agent("explicit"):
            await function_agent("reader", fake_openai).run(user_msg="hello again")
    assert str(alone) == "echo: hello reader"
    assert str(in_workflow) == "echo: hello writer"
    await tracer.flush(c.attempt.attempt_id)
    spans = await stored_spans(store, c)
    assert [c.agent_name for c in extract_model_calls(spans)] == ["reader", "writer", "explicit"]
    steps = named(spans, "invoke_agent reader") + named(spans, "invoke_agent writer")
    assert sorted(s.attributes["gen_ai.agent.name"] for s in steps) == ["reader", "reader", "writer"]
