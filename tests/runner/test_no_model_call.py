"""The runner warns, once per rollout, about an attempt that succeeded without a recorded
model call (a cache answered, or the client is one agentbolt does not see): it trains nothing."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import openai
import pytest

from agentbolt import semconv
from agentbolt.runner import Runner
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import current_context
from agentbolt.types import LLM, RolloutStatus, Span
from fakes.openai_server import serve_fake_openai

WARNING = "made no recorded model call"


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "agentbolt.runner" and r.levelno == logging.WARNING and WARNING in r.getMessage()]


def gateway_span() -> Span:
    """A model call as the gateway stores it for the current attempt."""
    ctx = current_context()
    assert ctx is not None
    return Span(rollout_id=ctx.rollout_id, attempt_id=ctx.attempt_id, trace_id="t" * 32, span_id="gateway000000001",
                name="chat policy", start_time=1.0, end_time=2.0,
                attributes={semconv.LLM_REQUEST: json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
                            semconv.SCOPE_NAME: semconv.GATEWAY_SCOPE})


async def test_a_success_without_a_model_call_is_warned_about_once_with_what_to_do(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    r = await store.enqueue_rollout("2+2")  # e.g. DSPy's cache answered the prompt: reward 1, no call
    await Runner(lambda task: 1.0, store=store).run(stop_when_idle=True)

    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.SUCCEEDED
    (message,) = warnings(caplog)
    assert r.rollout_id in message and "trains nothing" in message
    assert "gateway" in message and "cache=False" in message  # what to do


async def test_a_call_the_tracer_recorded_is_enough(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    def agent(task: str, llm: LLM) -> float:
        client = openai.OpenAI(base_url=llm.endpoint, api_key="test")
        client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task}])
        return 1.0

    with serve_fake_openai() as base_url:
        await store.add_resources({"llm": LLM(endpoint=base_url, model="fake-model")})
        await store.enqueue_rollout("hi")
        await Runner(agent, store=store).run(stop_when_idle=True)
    assert warnings(caplog) == []


async def test_a_request_to_the_attempts_gateway_url_through_httpx_is_enough(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    async def agent(task: str, llm: LLM) -> float:  # a client no instrumentor traces: the gateway records it
        ctx = current_context()
        assert ctx is not None
        url = f"{llm.endpoint}/rollout/{ctx.rollout_id}/attempt/{ctx.attempt_id}/v1/chat/completions"
        async with httpx.AsyncClient() as client:
            await client.post(url, json={"model": llm.model, "messages": [{"role": "user", "content": task}]})
        return 1.0

    with serve_fake_openai() as base_url:
        await store.add_resources({"llm": LLM(endpoint=base_url, model="fake-model")})
        await store.enqueue_rollout("hi")
        await Runner(agent, store=store).run(stop_when_idle=True)
    assert warnings(caplog) == []


async def test_an_untraced_request_to_a_model_that_is_not_the_gateway_is_warned_about(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    async def agent(task: str, llm: LLM) -> float:  # answered, but recorded nowhere
        async with httpx.AsyncClient() as client:
            await client.post(f"{llm.endpoint}/chat/completions",
                              json={"model": llm.model, "messages": [{"role": "user", "content": task}]})
        return 1.0

    with serve_fake_openai() as base_url:
        await store.add_resources({"llm": LLM(endpoint=base_url, model="fake-model")})
        await store.enqueue_rollout("hi")
        await Runner(agent, store=store).run(stop_when_idle=True)
    assert len(warnings(caplog)) == 1


async def test_a_call_only_the_store_holds_is_found_there(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    async def agent(task: str) -> float:  # a call the gateway recorded from a client agentbolt does not see
        await store.add_spans([gateway_span()])
        return 1.0

    await store.enqueue_rollout("hi")
    await Runner(agent, store=store).run(stop_when_idle=True)
    assert warnings(caplog) == []


async def test_the_gateways_late_span_is_waited_for_when_the_rollout_had_a_model(
    store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    async def agent(task: str, llm: LLM) -> float:
        span = gateway_span()
        # the gateway writes its spans in the background, a few tens of ms after the answer
        asyncio.get_running_loop().call_later(0.05, lambda: asyncio.ensure_future(store.add_spans([span])))
        return 1.0

    await store.add_resources({"llm": LLM(endpoint="http://127.0.0.1:9/v1", model="m")})
    await store.enqueue_rollout("hi")
    await Runner(agent, store=store).run(stop_when_idle=True)
    assert warnings(caplog) == []


async def test_a_failed_attempt_is_not_warned_about(store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    def agent(task: Any) -> float:
        raise ValueError("broken before any call")

    await store.enqueue_rollout("hi")
    await Runner(agent, store=store).run(stop_when_idle=True)
    assert warnings(caplog) == []
