"""The tracer names the agent to the gateway: ``X-Agentbolt-Agent`` and ``traceparent`` on
requests to the attempt's gateway URL — and on no other request."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx

import agentbolt
from agentbolt.tracing.context import AttemptContext, activate
from agentbolt.tracing.propagation import AGENT_HEADER, is_gateway_url, stamp_headers
from agentbolt.types import LLM, Resources


def _ctx(resources: Resources | None = None) -> AttemptContext:
    return AttemptContext(rollout=SimpleNamespace(rollout_id="ro-1"), attempt=SimpleNamespace(attempt_id="at 1"),  # type: ignore[arg-type]
                          resources=resources, store=None, tracer=None)  # type: ignore[arg-type]


def _sent(url: str, **headers: Any) -> httpx.Request:
    request = httpx.Request("POST", url, headers=headers)
    stamp_headers(request)
    return request


def test_calls_to_the_attempts_gateway_carry_the_agent_name() -> None:
    gateway = "http://127.0.0.1:9/rollout/ro-1/attempt/at%201/v1/chat/completions"
    with activate(_ctx()), agentbolt.agent("sólver"):
        assert _sent(gateway).headers[AGENT_HEADER] == "s%C3%B3lver"  # percent-encoded; the gateway decodes it
        assert _sent(gateway, **{AGENT_HEADER: "mine"}).headers[AGENT_HEADER] == "mine"  # the program's own wins
        assert AGENT_HEADER not in _sent("https://api.example.com/v1/chat/completions").headers
        assert AGENT_HEADER not in _sent("http://127.0.0.1:9/rollout/ro-2/attempt/at%201/v1/chat/completions").headers
    assert AGENT_HEADER not in _sent(gateway).headers  # outside any rollout: nothing


def test_the_attempts_llm_endpoints_count_as_its_gateway() -> None:
    resources = Resources(version=1, resources={"llm": LLM(endpoint="http://vllm:8000/v1", model="m")})
    ctx = _ctx(resources)
    assert is_gateway_url("http://vllm:8000/v1/chat/completions", ctx)
    assert not is_gateway_url("http://vllm:8000/v10/chat/completions", ctx)
