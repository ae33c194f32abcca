"""Engines over HTTP: vLLM (against a fake in vLLM's recorded format) and any
OpenAI-compatible server (an engine_app without token ids), both behind the gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from agentbolt.engines import EngineError, OpenAIEngine, VLLMEngine, engine_app
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.memory import MemoryStore
from gateway import vllm_fake
from gateway.conftest import ADMIN, GatewayWorld
from gateway.fakes import REPLY, FakeEngine

MESSAGES = [{"role": "user", "content": "2+2?"}]


@pytest.fixture(scope="module")
def vllm_url() -> Iterator[str]:
    with serve_app_in_thread(vllm_fake.app) as url:
        yield url + "/v1"


@pytest.fixture
def vllm_world(vllm_url: str) -> Iterator[GatewayWorld]:
    engine = VLLMEngine(vllm_url, model="Qwen/Qwen2.5-0.5B-Instruct", policy_version=7)
    gateway = Gateway(engine, GatewayConfig())
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        w = GatewayWorld(url, engine, gateway)
        yield w
        w.admin.close()


def test_vllm_token_ids_and_logprobs_are_recorded(vllm_world: GatewayWorld) -> None:
    a = vllm_world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.chat.completions.create(model="whatever-the-agent-says", messages=MESSAGES)
    assert answer.choices[0].message.content == "Four."
    sent = vllm_fake.seen[-1]
    assert sent["return_token_ids"] is True and sent["logprobs"] is True
    assert sent["model"] == "Qwen/Qwen2.5-0.5B-Instruct"  # the served model, whatever the agent named
    (span,) = vllm_world.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    assert attrs["agentbolt.llm.prompt_token_ids"] == vllm_fake.PROMPT_IDS
    assert attrs["agentbolt.llm.response_token_ids"] == [30124, 30, 2]
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.11, -0.02, -0.001]
    assert attrs["agentbolt.llm.token_ids_source"] == "engine"
    assert attrs["agentbolt.llm.engine"] == "vllm"
    assert attrs["agentbolt.llm.policy_version"] == 7


def test_vllm_streams_carry_token_ids_per_chunk(vllm_world: GatewayWorld) -> None:
    a = vllm_world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Four."
    (span,) = vllm_world.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    assert attrs["agentbolt.llm.prompt_token_ids"] == vllm_fake.PROMPT_IDS
    assert attrs["agentbolt.llm.response_token_ids"] == [30124, 30, 2]
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.11, -0.02, -0.001]
    assert attrs["gen_ai.usage.input_tokens"] == len(vllm_fake.PROMPT_IDS)
    assert json.loads(attrs["agentbolt.llm.response"])["choices"][0]["message"]["content"] == "Four."


def test_vllm_errors_keep_their_status_and_message(vllm_world: GatewayWorld) -> None:
    a = vllm_world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="max_tokens must be at least 1"):
        client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=0)
    assert [m.id for m in client.models.list()] == ["Qwen/Qwen2.5-0.5B-Instruct"]


def test_an_openai_compatible_provider_gives_no_token_ids() -> None:
    provider = FakeEngine(token_ids=False)
    with serve_app_in_thread(engine_app(provider)) as provider_url:
        engine = OpenAIEngine(provider_url + "/v1", api_key="sk-provider")
        gateway = Gateway(engine, GatewayConfig())
        with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
            w = GatewayWorld(url, engine, gateway)
            a = w.claim()
            client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
            assert client.chat.completions.create(model="gpt-x", messages=MESSAGES).choices[0].message.content == REPLY
            streamed = client.chat.completions.create(model="gpt-x", messages=MESSAGES, stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in streamed) == REPLY
            spans = w.spans(a.rollout_id, 2)
            w.admin.close()
    assert "return_token_ids" not in provider.calls[0][0]  # never sent to servers that may refuse it
    for span in spans:
        attrs = span["attributes"]
        assert attrs["agentbolt.llm.token_ids_source"] == "none"
        assert "agentbolt.llm.response_token_ids" not in attrs
        assert attrs["agentbolt.llm.engine"] == "openai"
        assert attrs["agentbolt.llm.response_logprobs"] == [-0.5, -1.5, -2.5, -3.5]


async def test_an_unreachable_engine_is_a_502() -> None:
    engine = OpenAIEngine("http://127.0.0.1:9/v1", timeout=2)
    await engine.start()
    try:
        with pytest.raises(EngineError) as err:
            await engine.chat_completions({"model": "m", "messages": MESSAGES})
        assert err.value.status_code == 502 and err.value.retryable
        with pytest.raises(EngineError):
            [c async for c in engine.stream_chat_completions({"model": "m", "messages": MESSAGES})]
    finally:
        await engine.close()


def test_engine_app_serves_any_engine_openai_style() -> None:
    engine = FakeEngine()
    with serve_app_in_thread(engine_app(engine)) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        answer = client.chat.completions.create(model="m", messages=MESSAGES, extra_body={"return_token_ids": True})
        assert answer.choices[0].message.content == REPLY
        assert answer.model_extra["prompt_token_ids"]
        assert (
            "".join(c.choices[0].text for c in client.completions.create(model="m", prompt="x", stream=True)) == REPLY
        )
        engine.fail_next = [429]
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=MESSAGES)
    assert engine.started == 1
