"""The OpenAI Agents SDK with its default model (the Responses API) runs a tool agent
through the gateway: every call is recorded with token ids and logprobs, the second
call's recorded messages hold the question and the tool call, and its prompt reuses the
first call's token ids."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("agents", reason="needs the OpenAI Agents SDK (pip install openai-agents)")
pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agents import (
    Agent,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.adapters.samples import build_samples
from agentbolt.gateway import GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.types import Span
from gateway.conftest import GatewayWorld
from gateway.scripted_engine import ScriptedEngine


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
def engine() -> ScriptedEngine:
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    return ScriptedEngine(byte_tokenizer(), [call, "The answer is 5."], tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(retry_backoff=0.01)


def test_agents_sdk_default_model_through_the_gateway(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    set_tracing_disabled(True)  # the SDK's own trace export would go to OpenAI
    set_default_openai_client(AsyncOpenAI(base_url=a.base_url, api_key=a.token), use_for_tracing=False)
    agent = Agent(name="calc", instructions="Use the add tool.", tools=[add], model="policy")
    result = asyncio.run(Runner.run(agent, "What is 2 + 3?"))
    assert result.final_output == "The answer is 5."
    spans = world.spans(a.rollout_id, 2)
    for span in spans:
        attrs = span["attributes"]
        assert attrs["agentbolt.llm.api"] == "responses"
        assert attrs["agentbolt.llm.token_ids_source"] == "engine"
        assert len(attrs["agentbolt.llm.response_logprobs"]) == len(attrs["agentbolt.llm.response_token_ids"]) > 0
    messages = json.loads(spans[1]["attributes"]["agentbolt.llm.request"])["messages"]
    assert messages[1] == {"role": "user", "content": "What is 2 + 3?"}
    assert messages[2]["tool_calls"][0]["function"]["name"] == "add"
    assert messages[3]["role"] == "tool" and messages[3]["content"] == "5"
    assert spans[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    found = build_samples(extract_model_calls([Span.model_validate(s) for s in spans]))
    assert found is not None and len(found.samples) == 1 and found.merge_rate == 1.0
