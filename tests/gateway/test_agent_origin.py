"""A call names its agent to the gateway — ``X-Agentbolt-Agent`` header or a
``<model>#<agent>`` model name — and its caller's span with ``traceparent``; the
gateway's span records both, and the engine never sees the suffix."""

from __future__ import annotations

import openai

from agentbolt.adapters import TripletAdapter
from agentbolt.gateway.origin import (
    CallOrigin,
    origin_of,
    parse_traceparent,
    split_model_agent,
)
from agentbolt.types import Span
from gateway.conftest import GatewayWorld
from gateway.fakes import FakeEngine

MESSAGES = [{"role": "user", "content": "what is 2 + 2?"}]
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def test_a_header_names_the_agent_and_traceparent_makes_the_span_a_child(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token, default_headers={
        "X-Agentbolt-Agent": "solver", "traceparent": f"00-{TRACE}-{PARENT}-01"})
    client.chat.completions.create(model="policy", messages=MESSAGES)

    (span,) = world.spans(a.rollout_id, 1)
    assert span["attributes"]["agentbolt.agent.name"] == "solver"
    assert (span["trace_id"], span["parent_id"]) == (TRACE, PARENT)
    (t,) = TripletAdapter(agent_match="^solver$").adapt([Span.model_validate(span)])
    assert t.agent_name == "solver"


def test_a_model_name_suffix_names_the_agent_and_is_removed(world: GatewayWorld, engine: FakeEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token, default_headers={"X-Agentbolt-Agent": "other"})
    client.chat.completions.create(model="policy#planner", messages=MESSAGES)
    stream = client.chat.completions.create(model="policy#planner", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    spans = world.spans(a.rollout_id, 2)
    assert [s["attributes"]["agentbolt.agent.name"] for s in spans] == ["planner", "planner"]  # the suffix wins
    assert [body["model"] for body, _ in engine.calls] == ["policy", "policy"]
    assert all(s["attributes"]["gen_ai.request.model"] == "policy" for s in spans)


def test_a_call_that_names_nothing_records_no_agent(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token, default_headers={"traceparent": "garbage"})
    client.chat.completions.create(model="policy", messages=MESSAGES)
    (span,) = world.spans(a.rollout_id, 1)
    assert "agentbolt.agent.name" not in span["attributes"] and span["parent_id"] is None


def test_origin_parsing() -> None:
    assert parse_traceparent(f"00-{TRACE}-{PARENT}-01") == (TRACE, PARENT)
    assert parse_traceparent(f"00-{'0' * 32}-{PARENT}-01") is None  # all-zero trace id
    assert parse_traceparent(f"ff-{TRACE}-{PARENT}-01") is None  # forbidden version
    assert split_model_agent("org/model:v1#math-solver") == ("org/model:v1", "math-solver")
    assert split_model_agent("model#") == ("model", None)
    assert split_model_agent(None) == (None, None)
    body = {"model": "m#planner", "messages": []}
    origin, sent = origin_of({"x-agentbolt-agent": "sol%20ver"}, body)
    assert origin == CallOrigin("planner") and sent == {"model": "m", "messages": []} and body["model"] == "m#planner"
    assert origin_of({"x-agentbolt-agent": "sol%20ver"}, {"model": "m"})[0] == CallOrigin("sol ver")
