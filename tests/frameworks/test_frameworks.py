"""The framework matrix: one tool-using agent per framework runs through the gateway
against an engine that answers tool calls (the gateway's own templating and parsing,
over a scripted model), and its rollout becomes one training sample: every call is
recorded with token ids and logprobs, the last call's messages hold the question and the
tool call, and its prompt is token-exact."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from gateway.conftest import GatewayWorld
from gateway.scripted_engine import ScriptedEngine

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.adapters.samples import build_samples
from agentbolt.gateway import GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.types import Span
from frameworks.agents import FRAMEWORKS, QUESTION

CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(byte_tokenizer(), [CALL, "The answer is 5."], tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(retry_backoff=0.01)


@pytest.mark.parametrize("name", sorted(FRAMEWORKS))
def test_a_tool_agent_trains_through_the_gateway(name: str, world: GatewayWorld) -> None:
    module, agent = FRAMEWORKS[name]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{name} is not installed")
    a = world.claim()
    assert "5" in agent(a.base_url, a.token)
    spans = world.spans(a.rollout_id, 2)
    for span in spans:
        attrs = span["attributes"]
        assert attrs["agentbolt.llm.token_ids_source"] == "engine"
        assert len(attrs["agentbolt.llm.response_logprobs"]) == len(attrs["agentbolt.llm.response_token_ids"]) > 0
    messages = json.loads(spans[1]["attributes"]["agentbolt.llm.request"])["messages"]
    roles = [m["role"] for m in messages]
    assert any(m["role"] == "user" and QUESTION in str(m["content"]) for m in messages)
    call = messages[roles.index("assistant")]["tool_calls"][0]
    assert call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert spans[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    found = build_samples(extract_model_calls([Span.model_validate(s) for s in spans]))
    assert found is not None and len(found.samples) == 1 and found.merge_rate == 1.0
