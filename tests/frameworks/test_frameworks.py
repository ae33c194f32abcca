"""The framework matrix: one tool-using agent per framework runs through the gateway
against an engine that answers tool calls (the gateway's own templating and parsing,
over a model scripted per framework), and its rollout trains: every call is recorded with
token ids and logprobs, the last call's messages hold the question and the tool call, and
the rollout becomes the training samples the framework's history handling allows —
one, with a token-exact last prompt, unless ``frameworks.agents.ROLLOUTS`` says otherwise
(a framework that rewrites its history between calls)."""

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
from frameworks.agents import FRAMEWORKS, QUESTION, rollout


@pytest.fixture(params=sorted(FRAMEWORKS))
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def engine(name: str) -> ScriptedEngine:
    return ScriptedEngine(byte_tokenizer(), list(rollout(name).replies), tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(retry_backoff=0.01)


def test_a_tool_agent_trains_through_the_gateway(name: str, world: GatewayWorld) -> None:
    module, agent = FRAMEWORKS[name]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{name} is not installed")
    expected = rollout(name)
    a = world.claim()
    assert "5" in agent(a.base_url, a.token)
    spans = world.spans(a.rollout_id, expected.calls)
    for span in spans:
        attrs = span["attributes"]
        assert attrs["agentbolt.llm.token_ids_source"] == "engine"
        assert len(attrs["agentbolt.llm.response_logprobs"]) == len(attrs["agentbolt.llm.response_token_ids"]) > 0
    last = spans[-1]["attributes"]
    messages = json.loads(last["agentbolt.llm.request"])["messages"]
    assert any(QUESTION in json.dumps(m["content"]) for m in messages if m["role"] == "user")
    if expected.api_tool_calls:
        call = next(m for m in messages if m["role"] == "assistant")["tool_calls"][0]
        assert call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
        assert any(m["role"] == "tool" and "5" in json.dumps(m["content"]) for m in messages)  # the tool ran
    else:  # the framework's own text format: the prompt holds the call and the tool's result (no other 5)
        said = json.dumps([m["content"] for m in messages if m["role"] != "system"])
        assert "add" in said and "5" in said
    assert (last["agentbolt.llm.prompt_source"] == "token_exact") is expected.token_exact
    found = build_samples(extract_model_calls([Span.model_validate(s) for s in spans]))
    assert found is not None and len(found.samples) == expected.samples
    assert found.merge_rate == 1.0 - (expected.samples - 1) / (expected.calls - 1)
