"""LangChain (langchain-openai) and LiteLLM calls against the fake server become
normalised model-call spans; the frameworks' own wrapper spans are marked as such so
that each model call counts once."""

from __future__ import annotations

import json

import httpx
import pytest
from fakes.openai_server import FakeOpenAI, render_chat, tokenize
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import Tracer, agent
from agentbolt.types import Span

from .recording import claim, model_calls, stored_spans


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 — test input only


def chat_model(base_url: str, **kwargs: object) -> ChatOpenAI:
    """A ChatOpenAI with its own async HTTP client: langchain-openai otherwise shares one
    per process, tied to the event loop of the first test that used it."""
    return ChatOpenAI(
        base_url=base_url, api_key="test", model="fake-model", http_async_client=httpx.AsyncClient(), **kwargs
    )


def wrappers(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.attributes.get("agentbolt.llm.wrapper")]


async def test_langchain_chat_model_calls_are_normalised_once(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    llm = chat_model(fake_openai, temperature=0.2)
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        with agent("writer"):
            first = await llm.ainvoke("hello langchain")
            second = llm.invoke("hello again")
    assert first.content == "echo: hello langchain"
    assert second.content == "echo: hello again"
    await tracer.flush(c.attempt.attempt_id)
    spans = await stored_spans(store, c)
    calls = sorted(model_calls(spans), key=lambda s: s.start_time)
    assert [json.loads(s.attributes["agentbolt.llm.request"])["messages"][-1]["content"] for s in calls] == [
        "hello langchain",
        "hello again",
    ]
    for s, text in zip(calls, ["hello langchain", "hello again"], strict=True):
        assert s.name == "chat fake-model"
        assert s.attributes["gen_ai.request.temperature"] == 0.2
        assert s.attributes["agentbolt.agent.name"] == "writer"
        assert s.attributes["agentbolt.llm.prompt_token_ids"] == tokenize(
            render_chat([{"role": "user", "content": text}])
        )
        assert s.attributes["agentbolt.llm.response_token_ids"] == tokenize(f"echo: {text}")
    # LangChain's own ChatOpenAI spans are kept, marked as wrappers of the client calls
    wrapped = wrappers(spans)
    assert [w.name for w in wrapped] == ["ChatOpenAI", "ChatOpenAI"]
    assert sorted(i for w in wrapped for i in w.attributes["agentbolt.llm.wrapped_span_ids"]) == sorted(
        s.span_id for s in calls
    )
    for w in wrapped:
        assert "agentbolt.llm.request" not in w.attributes
        assert "input.value" not in w.attributes and "output.value" not in w.attributes
        assert json.loads(w.attributes["metadata"])["ls_model_name"] == "fake-model"


async def test_langchain_tool_calling_round_trip(store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI) -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    llm = chat_model(fake_openai).bind_tools([calculator])
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        messages: list = [HumanMessage("use the calculator: 3*5")]
        ai = await llm.ainvoke(messages)
        (call,) = ai.tool_calls
        messages += [ai, ToolMessage(calculator.invoke(call["args"]), tool_call_id=call["id"])]
        final = await llm.ainvoke(messages)
    assert final.content == "The tool returned 15."
    await tracer.flush(c.attempt.attempt_id)
    first, second = sorted(model_calls(await stored_spans(store, c)), key=lambda s: s.start_time)
    assert json.loads(first.attributes["agentbolt.llm.request"])["tools"][0]["function"]["name"] == "calculator"
    (tc,) = json.loads(first.attributes["agentbolt.llm.response"])["choices"][0]["message"]["tool_calls"]
    assert json.loads(tc["function"]["arguments"]) == {"expression": "3*5"}
    last = json.loads(second.attributes["agentbolt.llm.request"])["messages"][-1]
    assert last == {"role": "tool", "tool_call_id": tc["id"], "content": "15"}


async def test_a_framework_model_without_a_client_span_is_the_model_call(store: MemoryStore, tracer: Tracer) -> None:
    """A LangChain chat model that does not go through an instrumented client (here a
    fake one) is normalised from LangChain's own description, with no token ids."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    llm = FakeListChatModel(responses=["forty-two"])
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        assert (await llm.ainvoke("what is six times seven?")).content == "forty-two"
    await tracer.flush(c.attempt.attempt_id)
    spans = await stored_spans(store, c)
    (call,) = model_calls(spans)
    assert not wrappers(spans)
    assert call.attributes["gen_ai.operation.name"] == "chat"
    request = json.loads(call.attributes["agentbolt.llm.request"])
    assert request["messages"] == [{"role": "user", "content": "what is six times seven?"}]
    response = json.loads(call.attributes["agentbolt.llm.response"])
    assert response["choices"][0]["message"]["content"] == "forty-two"
    assert call.attributes["agentbolt.llm.token_ids_source"] == "none"


@pytest.mark.filterwarnings("ignore:.*ReadOnly.*:UserWarning")  # raised by LiteLLM's own types on import
async def test_litellm_through_its_openai_compatible_provider(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    litellm = pytest.importorskip("litellm", reason="LiteLLM is an optional extra")
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        r = await litellm.acompletion(
            model="openai/fake-model",
            api_base=fake_openai,
            api_key="test",
            messages=[{"role": "user", "content": "hi litellm"}],
            temperature=0.5,
        )
    assert r.choices[0].message.content == "echo: hi litellm"
    await tracer.flush(c.attempt.attempt_id)
    spans = await stored_spans(store, c)
    (call,) = model_calls(spans)
    assert call.attributes["agentbolt.llm.response_token_ids"] == tokenize("echo: hi litellm")
    assert call.attributes["gen_ai.request.temperature"] == 0.5
    (outer,) = wrappers(spans)
    assert outer.attributes["agentbolt.llm.wrapped_span_ids"] == [call.span_id]
    assert call.parent_id == outer.span_id
