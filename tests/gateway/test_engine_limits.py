"""Engine limits at the gateway: a prompt longer than the engine's context window is a 400
in each API's own error shape — chat completions and Responses (OpenAI's
``context_length_exceeded``), Messages (Anthropic's "prompt is too long") — recorded on
the call's span, and the engine is never called with it; a call that sets no limit gets
all the room the context leaves (the local engine, not a fixed cut)."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.gateway import GatewayConfig, rollout_anthropic_base_url
from agentbolt.models import byte_tokenizer
from gateway.conftest import GatewayWorld
from gateway.scripted_engine import ScriptedEngine

CONTEXT = 200
LONG = "x" * CONTEXT  # the byte tokenizer: one token per character, so it cannot fit


@pytest.fixture
def engine() -> ScriptedEngine:
    engine = ScriptedEngine(byte_tokenizer(), ["ok"])
    engine.context_length = CONTEXT
    return engine


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(retry_backoff=0.01)


def test_a_prompt_past_the_context_is_a_400_in_each_apis_shape(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token, max_retries=0)
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": LONG}])
    assert chat.value.code == "context_length_exceeded" and "prompt is too long" in chat.value.message
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model="m", input=LONG)
    assert responses.value.code == "context_length_exceeded"
    with httpx.Client(base_url=rollout_anthropic_base_url(world.url, a.rollout_id, a.attempt_id)) as http:
        r = http.post("/v1/messages", headers={"x-api-key": a.token, "anthropic-version": "2023-06-01"},
                      json={"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": LONG}]})
    assert r.status_code == 400
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    # the words Claude Code reads to compact its conversation and try again
    assert error["error"]["message"].startswith("prompt is too long: ")
    assert f"> {CONTEXT - 1} maximum" in error["error"]["message"]
    with httpx.Client(base_url=rollout_anthropic_base_url(world.url, a.rollout_id, a.attempt_id)) as http:
        streamed = http.post("/v1/messages", headers={"x-api-key": a.token},
                             json={"model": "m", "max_tokens": 16, "stream": True,
                                   "messages": [{"role": "user", "content": LONG}]})
    assert streamed.status_code == 400 and streamed.json()["error"]["message"].startswith("prompt is too long")
    spans = world.spans(a.rollout_id, 4)
    assert [s["attributes"]["http.response.status_code"] for s in spans] == [400, 400, 400, 400]
    assert all("prompt is too long" in s["status_message"] for s in spans)
    assert engine.prompts == []  # refused before the engine was called
    fits = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert fits.choices[0].message.content == "ok"
    assert json.loads(world.spans(a.rollout_id, 5)[4]["attributes"]["agentbolt.llm.request"]).get("max_tokens") is None


def test_the_local_engine_gives_a_call_without_a_limit_what_the_context_leaves() -> None:
    pytest.importorskip("torch", reason="the transformers engine needs torch")
    import asyncio

    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.models import tiny_model

    model, tokenizer = tiny_model(seed=1, vocab="bytes", max_positions=96)

    async def run() -> tuple[int, int, int]:
        engine = TransformersEngine(model, tokenizer, batch_window_ms=1)
        capped = TransformersEngine(model, tokenizer, batch_window_ms=1, default_max_tokens=5, context_length=64)
        try:
            body = {"prompt": [5, 6, 7, 8], "ignore_eos": True}
            free = await engine.completions(body)
            cut = await capped.completions(body)
            asked = await capped.completions({**body, "max_tokens": 500})  # past the room: cut to it
            return (free["usage"]["completion_tokens"], cut["usage"]["completion_tokens"],
                    asked["usage"]["completion_tokens"])
        finally:
            await engine.close()
            await capped.close()

    assert asyncio.run(run()) == (96 - 4, 5, 64 - 4)
    with pytest.raises(ValueError, match="context_length must be in"):
        TransformersEngine(model, tokenizer, context_length=97)
