"""Calls made with the real ``openai`` client against the fake server become model-call
spans normalised to gen_ai.* + agentbolt.llm.*, with the engine's token ids."""

from __future__ import annotations

import json

import openai
import pytest
from fakes.openai_server import (
    FakeOpenAI,
    completion_reply,
    render_chat,
    token_logprob,
    tokenize,
)

from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import Tracer
from agentbolt.types import SpanStatus

from .recording import claim, model_calls, stored_spans

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "evaluate arithmetic",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


async def one_call(store: MemoryStore, tracer: Tracer, call):  # type: ignore[no-untyped-def]
    """Run ``call()`` inside an attempt; the single model-call span it produced."""
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        await call()
    await tracer.flush(c.attempt.attempt_id)
    (span,) = model_calls(await stored_spans(store, c))
    return span


async def test_chat_completion_span(store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]

    async def call() -> None:
        await client.chat.completions.create(
            model="fake-model", messages=messages, temperature=0.7, top_p=0.9, max_tokens=64, logprobs=True
        )

    span = await one_call(store, tracer, call)
    a = span.attributes
    assert span.name == "chat fake-model"
    assert span.kind == "client"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.system"] == "openai"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "fake-model"
    assert a["gen_ai.response.model"] == "fake-model"
    assert a["gen_ai.request.temperature"] == 0.7
    assert a["gen_ai.request.top_p"] == 0.9
    assert a["gen_ai.request.max_tokens"] == 64
    answer = tokenize("echo: hello there")
    prompt = tokenize(render_chat(messages))
    assert a["gen_ai.usage.input_tokens"] == len(prompt)
    assert a["gen_ai.usage.output_tokens"] == len(answer)
    assert a["gen_ai.response.finish_reasons"] == ["stop"]
    assert json.loads(a["agentbolt.llm.request"])["messages"] == messages
    response = json.loads(a["agentbolt.llm.response"])
    assert response["choices"][0]["message"]["content"] == "echo: hello there"
    assert a["agentbolt.llm.prompt_token_ids"] == prompt
    assert a["agentbolt.llm.response_token_ids"] == answer
    assert a["agentbolt.llm.response_logprobs"] == [token_logprob(t, i) for i, t in enumerate(answer)]
    assert a["agentbolt.llm.token_ids_source"] == "engine"
    # the raw OpenInference copies are replaced by the normalised attributes
    assert "input.value" not in a and "output.value" not in a
    assert not any(k.startswith("llm.input_messages.") for k in a)


async def test_streamed_chat_records_the_reassembled_response(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")
    text = "stream me a fairly long answer, with ünïcode"
    got: list[str] = []

    async def call() -> None:
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": text}],
            stream=True,
            logprobs=True,
            stream_options={"include_usage": True},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                got.append(chunk.choices[0].delta.content)

    span = await one_call(store, tracer, call)
    a = span.attributes
    answer = tokenize(f"echo: {text}")
    assert "".join(got) == f"echo: {text}"
    assert json.loads(a["agentbolt.llm.response"])["choices"][0]["message"]["content"] == f"echo: {text}"
    assert a["agentbolt.llm.prompt_token_ids"] == tokenize(render_chat([{"role": "user", "content": text}]))
    assert a["agentbolt.llm.response_token_ids"] == answer
    assert a["agentbolt.llm.response_logprobs"] == [token_logprob(t, i) for i, t in enumerate(answer)]
    assert a["gen_ai.usage.output_tokens"] == len(answer)
    assert a["gen_ai.response.finish_reasons"] == ["stop"]


def test_a_synchronous_program_streaming_with_the_sync_client(store: MemoryStore, fake_openai: FakeOpenAI) -> None:
    """A fully synchronous program: tracer started outside any event loop."""
    import asyncio

    tracer = Tracer(store, flush_interval=0.01)
    tracer.start()
    c = asyncio.run(claim(store))
    client = openai.OpenAI(base_url=fake_openai, api_key="test")
    with tracer.attempt(c.rollout, c.attempt):
        for _ in client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "sync stream"}], stream=True
        ):
            pass

    async def finish() -> list:
        await tracer.flush(c.attempt.attempt_id)
        await tracer.aclose()
        return await stored_spans(store, c)

    (span,) = model_calls(asyncio.run(finish()))
    assert span.attributes["agentbolt.llm.response_token_ids"] == tokenize("echo: sync stream")


async def test_tool_calls_are_recorded_in_request_and_response(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")
    messages: list[dict] = [{"role": "user", "content": "please use the calculator: 6*7"}]

    async def call() -> None:
        first = await client.chat.completions.create(model="fake-model", messages=messages, tools=[CALCULATOR])
        tool_call = first.choices[0].message.tool_calls[0]
        assert json.loads(tool_call.function.arguments) == {"expression": "6*7"}
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "42"})
        second = await client.chat.completions.create(model="fake-model", messages=messages, tools=[CALCULATOR])
        assert second.choices[0].message.content == "The tool returned 42."

    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        await call()
    await tracer.flush(c.attempt.attempt_id)
    first, second = sorted(model_calls(await stored_spans(store, c)), key=lambda s: s.start_time)
    request = json.loads(first.attributes["agentbolt.llm.request"])
    assert request["tools"] == [CALCULATOR]
    (call_out,) = json.loads(first.attributes["agentbolt.llm.response"])["choices"][0]["message"]["tool_calls"]
    assert call_out["function"]["name"] == "calculator"
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    replayed = json.loads(second.attributes["agentbolt.llm.request"])["messages"]
    assert replayed[-1] == {"role": "tool", "tool_call_id": call_out["id"], "content": "42"}
    assert replayed[-2]["tool_calls"][0]["id"] == call_out["id"]


async def test_streamed_tool_call_is_reassembled(store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")

    async def call() -> None:
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": "use the calculator 1+1"}],
            tools=[CALCULATOR],
            stream=True,
        )
        async for _ in stream:
            pass

    span = await one_call(store, tracer, call)
    (tc,) = json.loads(span.attributes["agentbolt.llm.response"])["choices"][0]["message"]["tool_calls"]
    assert tc["function"]["name"] == "calculator"
    assert json.loads(tc["function"]["arguments"]) == {"expression": "1+1"}
    assert span.attributes["agentbolt.llm.token_ids_source"] == "engine"


@pytest.mark.parametrize("stream", [False, True])
async def test_completions_api(store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI, stream: bool) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")

    async def call() -> None:
        result = await client.completions.create(model="fake-model", prompt="The sky is", logprobs=1, stream=stream)
        if stream:
            async for _ in result:  # type: ignore[union-attr]
                pass

    span = await one_call(store, tracer, call)
    a = span.attributes
    answer = tokenize(completion_reply("The sky is"))
    assert span.name == "text_completion fake-model"
    assert a["gen_ai.operation.name"] == "text_completion"
    assert json.loads(a["agentbolt.llm.request"])["prompt"] == "The sky is"
    assert json.loads(a["agentbolt.llm.response"])["choices"][0]["text"] == completion_reply("The sky is")
    assert a["agentbolt.llm.prompt_token_ids"] == tokenize("The sky is")
    assert a["agentbolt.llm.response_token_ids"] == answer
    assert a["agentbolt.llm.response_logprobs"] == [token_logprob(t, i) for i, t in enumerate(answer)]


async def test_responses_api_is_normalised_to_chat_shape(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")

    async def call() -> None:
        r = await client.responses.create(model="fake-model", instructions="be nice", input="what is up")
        assert r.output_text == "echo: what is up"

    span = await one_call(store, tracer, call)
    a = span.attributes
    assert span.name == "chat fake-model"
    assert json.loads(a["agentbolt.llm.request"])["messages"] == [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "what is up"},
    ]
    response = json.loads(a["agentbolt.llm.response"])
    assert response["choices"][0]["message"] == {"role": "assistant", "content": "echo: what is up"}
    assert response["output"][0]["type"] == "message"  # the original stays
    assert a["gen_ai.usage.output_tokens"] == len(tokenize("echo: what is up"))
    assert a["agentbolt.llm.token_ids_source"] == "none"


async def test_without_token_ids_in_the_response_the_source_is_none(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")

    async def call() -> None:
        await client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "x"}], extra_body={"return_token_ids": False}
        )

    span = await one_call(store, tracer, call)
    assert span.attributes["agentbolt.llm.token_ids_source"] == "none"
    assert "agentbolt.llm.prompt_token_ids" not in span.attributes
    assert "agentbolt.llm.response_token_ids" not in span.attributes


async def test_a_failed_call_is_an_error_span_with_its_request(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test", max_retries=0)

    async def call() -> None:
        with pytest.raises(openai.BadRequestError):
            await client.responses.create(model="fake-model", input="x", stream=True)

    span = await one_call(store, tracer, call)
    assert span.status == SpanStatus.ERROR
    assert "BadRequestError" in (span.status_message or "")
    assert json.loads(span.attributes["agentbolt.llm.request"])["input"] == "x"
    assert span.attributes["agentbolt.llm.token_ids_source"] == "none"
    assert any(e.name == "exception" for e in span.events)
