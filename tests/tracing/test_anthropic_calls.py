"""A program using the ``anthropic`` client is traced too: the OpenInference Anthropic
instrumentor is switched on, and a call through the gateway's Messages API counts once,
as the gateway's span (token ids, logprobs), named after the agent that made it."""

from __future__ import annotations

import pytest

anthropic = pytest.importorskip("anthropic", reason="needs the anthropic client (pip install 'agentbolt[anthropic]')")
pytest.importorskip("openinference.instrumentation.anthropic",
                    reason="needs openinference-instrumentation-anthropic (pip install 'agentbolt[anthropic]')")
pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from gateway.scripted_engine import ScriptedEngine

import agentbolt
from agentbolt import semconv
from agentbolt.adapters.calls import extract_model_calls
from agentbolt.gateway import Gateway, GatewayConfig, rollout_anthropic_base_url
from agentbolt.models import byte_tokenizer
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import Tracer
from agentbolt.tracing.instrumentation import instrumented_libraries

from .recording import claim, stored_spans


async def test_an_anthropic_call_through_the_gateway_counts_once_with_its_agent() -> None:
    engine = ScriptedEngine(byte_tokenizer(), ["Hello there."], tool_parser="hermes")
    gateway = Gateway(engine, GatewayConfig(retry_backoff=0.01))
    with serve_in_thread(MemoryStore(), admin_token="admin", gateway=gateway) as url:
        store = HttpStore(url, token="admin")
        await store.start()
        try:
            async with Tracer(store, flush_interval=0.01) as tracer:
                c = await claim(store)
                base = rollout_anthropic_base_url(url, c.rollout.rollout_id, c.attempt.attempt_id)
                client = anthropic.AsyncAnthropic(base_url=base, api_key="admin", max_retries=0)
                with tracer.attempt(c.rollout, c.attempt), agentbolt.agent("planner"):
                    await client.messages.create(model="m", max_tokens=20, messages=[{"role": "user", "content": "hi"}])
                await tracer.flush(c.attempt.attempt_id)
                assert "anthropic" in instrumented_libraries()
            await gateway.flush()
            spans = await stored_spans(store, c)
        finally:
            await store.close()
    scope = "openinference.instrumentation.anthropic"
    client_spans = [s for s in spans if s.attributes.get(semconv.SCOPE_NAME) == scope]
    assert len(client_spans) == 1 and client_spans[0].attributes[semconv.OI_SPAN_KIND] == "LLM"
    (call,) = extract_model_calls(spans)
    assert call.agent_name == "planner"
    assert call.response_token_ids == [*engine.tokenizer("Hello there.")["input_ids"], engine.tokenizer.eos_token_id]
    assert call.response_logprobs is not None and len(call.response_logprobs) == len(call.response_token_ids)
