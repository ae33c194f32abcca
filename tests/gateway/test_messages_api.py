"""Anthropic's Messages API at the gateway, called with the real ``anthropic`` client:
tools and tool results across turns (token-exact history), the streamed event sequence,
``system`` blocks, ``tool_choice``, server tools left out and recorded, ``count_tokens``,
the model list in Anthropic's shape, the header form, ``x-api-key`` and Bearer auth with
scoped tokens, ``?beta=true``, and errors in Anthropic's shape."""

from __future__ import annotations

import json

import httpx
import pytest

anthropic = pytest.importorskip("anthropic", reason="needs the anthropic client (pip install 'agentbolt[anthropic]')")
pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.adapters.samples import build_samples
from agentbolt.gateway import Gateway, GatewayConfig, rollout_anthropic_base_url
from agentbolt.models import byte_tokenizer
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Span
from gateway.conftest import ADMIN, Attempt, GatewayWorld
from gateway.fakes import FakeEngine
from gateway.scripted_engine import ScriptedEngine

TOOLS = [{"name": "add", "description": "Add two integers",
          "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                           "required": ["a", "b"]}}]
QUESTION = "What is 2 + 3?"
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
ANSWER = "The answer is 5."


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(byte_tokenizer(), [CALL, ANSWER], tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(sampling={"train": {"temperature": 1.0}}, retry_backoff=0.01)


def _client(world: GatewayWorld, a: Attempt, **kw: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=rollout_anthropic_base_url(world.url, a.rollout_id, a.attempt_id),
                               api_key=a.token, max_retries=0, **kw)  # type: ignore[arg-type]


def _messages(span: dict) -> list[dict]:  # type: ignore[type-arg]
    return json.loads(span["attributes"]["agentbolt.llm.request"])["messages"]


def _second_turn(first: anthropic.types.Message) -> list[dict]:  # type: ignore[type-arg]
    (use,) = [b for b in first.content if b.type == "tool_use"]
    return [{"role": "user", "content": QUESTION},
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "5"}]}]


def test_tool_use_then_tool_result_is_token_exact(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = _client(world, a)
    system = [{"type": "text", "text": "Use the tools.", "cache_control": {"type": "ephemeral"}}]
    first = client.messages.create(model="claude-policy", max_tokens=256, system=system,  # type: ignore[arg-type]
                                   messages=[{"role": "user", "content": QUESTION}], tools=TOOLS)  # type: ignore[arg-type]
    assert first.type == "message" and first.id.startswith("msg_") and first.model == "claude-policy"
    assert first.stop_reason == "tool_use"
    (use,) = first.content
    assert use.type == "tool_use" and use.name == "add" and use.input == {"a": 2, "b": 3}
    assert use.id.startswith("toolu_")
    second = client.messages.create(model="claude-policy", max_tokens=256, system=system,  # type: ignore[arg-type]
                                    messages=_second_turn(first), tools=TOOLS)  # type: ignore[arg-type]
    assert second.stop_reason == "end_turn" and second.stop_sequence is None
    assert [b.type for b in second.content] == ["text"] and second.content[0].text == ANSWER  # type: ignore[union-attr]
    assert second.usage.output_tokens == len(engine.tokenizer(ANSWER)["input_ids"]) + 1
    assert second.usage.input_tokens == len(engine.prompts[1])
    s1, s2 = world.spans(a.rollout_id, 2)
    recorded = _messages(s2)
    assert [m["role"] for m in recorded] == ["system", "user", "assistant", "tool"]
    assert recorded[0]["content"] == "Use the tools." and recorded[3] == {"role": "tool", "tool_call_id": use.id,
                                                                         "content": "5"}
    for span in (s1, s2):
        attrs = span["attributes"]
        assert attrs["agentbolt.llm.api"] == "messages" and attrs["agentbolt.llm.token_ids_source"] == "engine"
        assert len(attrs["agentbolt.llm.response_logprobs"]) == len(attrs["agentbolt.llm.response_token_ids"]) > 0
        assert attrs["agentbolt.llm.policy_version"] == 1
    assert s1["attributes"]["agentbolt.llm.message_id"] == first.id
    assert s2["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    p1, p2 = engine.prompts
    sampled = s1["attributes"]["agentbolt.llm.response_token_ids"]
    assert p2[: len(p1) + len(sampled)] == p1 + sampled
    found = build_samples(extract_model_calls([Span.model_validate(s) for s in (s1, s2)]))
    assert found is not None and len(found.samples) == 1 and found.merge_rate == 1.0


def test_streaming_event_sequence(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = _client(world, a)
    with client.messages.stream(model="claude-policy", max_tokens=256, tools=TOOLS,  # type: ignore[arg-type]
                                messages=[{"role": "user", "content": QUESTION}]) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_message()
    raw = [k for k in kinds if k in ("message_start", "content_block_start", "content_block_delta",
                                     "content_block_stop", "message_delta", "message_stop")]
    assert raw == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                   "message_delta", "message_stop"]
    (use,) = first.content
    assert use.type == "tool_use" and use.input == {"a": 2, "b": 3} and first.stop_reason == "tool_use"
    assert first.usage.input_tokens == len(engine.prompts[0]) and first.usage.output_tokens > 0
    with client.messages.stream(model="claude-policy", max_tokens=256, tools=TOOLS,  # type: ignore[arg-type]
                                messages=_second_turn(first)) as stream:  # type: ignore[arg-type]
        text = "".join(stream.text_stream)
        second = stream.get_final_message()
    assert text == ANSWER and second.content[0].text == ANSWER  # type: ignore[union-attr]
    assert second.stop_reason == "end_turn"
    s2 = world.spans(a.rollout_id, 2)[1]
    assert s2["attributes"]["agentbolt.llm.streamed"] is True
    assert s2["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    assert len(s2["attributes"]["agentbolt.llm.response_logprobs"]) == len(
        s2["attributes"]["agentbolt.llm.response_token_ids"]) > 0


def test_raw_sse_frames(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = [ANSWER]
    a = world.claim()
    body = {"model": "claude-policy", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=world.url, timeout=30) as http:
        r = http.post(f"/rollout/{a.rollout_id}/attempt/{a.attempt_id}/v1/messages", json=body,
                      headers={"x-api-key": a.token, "anthropic-version": "2023-06-01"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f]
    names = [f.split("\n")[0].removeprefix("event: ") for f in frames]
    datas = [json.loads(f.split("\n")[1].removeprefix("data: ")) for f in frames]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert all(d["type"] == n for n, d in zip(names, datas, strict=True))
    start = datas[0]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["role"] == "assistant"
    assert datas[2]["content_block"] == {"type": "text", "text": ""}
    assert "".join(d["delta"]["text"] for d in datas if d["type"] == "content_block_delta") == ANSWER
    assert datas[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert datas[-2]["usage"]["output_tokens"] == len(engine.tokenizer(ANSWER)["input_ids"]) + 1


def test_tool_choice_and_server_tools(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = ['{"a": 2, "b": 3}}\n</tool_call>']  # the model goes on from the forced start
    a = world.claim()
    client = _client(world, a)
    tools = [*TOOLS, {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    answer = client.messages.create(model="claude-policy", max_tokens=64, tools=tools,  # type: ignore[arg-type]
                                    tool_choice={"type": "tool", "name": "add"},
                                    messages=[{"role": "user", "content": QUESTION}])
    assert answer.content[0].type == "tool_use"
    prompt = engine.tokenizer.decode(engine.prompts[0])
    assert prompt.endswith('<tool_call>\n{"name": "add", "arguments": ')  # the named call's forced start
    assert "web_search" not in prompt
    (span,) = world.spans(a.rollout_id, 1)
    assert span["attributes"]["agentbolt.llm.dropped_tools"] == ["web_search_20250305:web_search"]
    request = json.loads(span["attributes"]["agentbolt.llm.request"])
    assert [t["function"]["name"] for t in request["tools"]] == ["add"]


def test_thinking_blocks_reach_the_model_as_text(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = [ANSWER]
    a = world.claim()
    client = _client(world, a)
    history = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": [{"type": "thinking", "thinking": "They greet me.", "signature": "s"},
                                                 {"type": "text", "text": "Hello."}]},
               {"role": "user", "content": [{"type": "text", "text": "How are you?"}]}]
    client.messages.create(model="claude-policy", max_tokens=64, messages=history,  # type: ignore[arg-type]
                           thinking={"type": "enabled", "budget_tokens": 1024})
    recorded = _messages(world.spans(a.rollout_id, 1)[0])
    assert recorded[1] == {"role": "assistant", "content": "They greet me.\nHello."}


def test_count_tokens_is_the_prompt_the_engine_gets(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = _client(world, a)
    kwargs = {"model": "claude-policy", "system": "Use the tools.", "tools": TOOLS,
              "messages": [{"role": "user", "content": QUESTION}]}
    counted = client.messages.count_tokens(**kwargs)  # type: ignore[arg-type]
    client.messages.create(max_tokens=64, **kwargs)  # type: ignore[arg-type]
    assert counted.input_tokens == len(engine.prompts[0])


def test_models_in_anthropic_shape(world: GatewayWorld) -> None:
    a = world.claim()
    page = _client(world, a).models.list()
    assert [m.id for m in page.data] == ["scripted"] and page.data[0].type == "model"
    assert _client(world, a).models.retrieve("scripted").id == "scripted"
    with pytest.raises(anthropic.NotFoundError):
        _client(world, a).models.retrieve("claude-opus-4")
    with httpx.Client(base_url=a.base_url, headers={"Authorization": f"Bearer {a.token}"}) as http:
        assert http.get("/models").json()["object"] == "list"  # OpenAI clients keep OpenAI's shape
        assert http.get("/models/scripted").json()["object"] == "model"
        missing = http.get("/models/gpt-4o")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_header_form_auth_kinds_and_beta_query(world: GatewayWorld) -> None:
    a = world.claim()
    plain = anthropic.Anthropic(base_url=world.url, api_key=ADMIN, max_retries=0,
                                default_headers={"X-Agentbolt-Rollout-Id": a.rollout_id,
                                                 "X-Agentbolt-Attempt-Id": a.attempt_id})
    plain.messages.create(model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    scoped = anthropic.Anthropic(base_url=world.url, api_key=a.token, max_retries=0)  # x-api-key, header form
    scoped.messages.create(model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    bearer = anthropic.Anthropic(base_url=world.url, auth_token=a.token, max_retries=0)  # Authorization: Bearer
    bearer.beta.messages.create(model="m", max_tokens=16, betas=["interleaved-thinking-2025-05-14"],
                                messages=[{"role": "user", "content": "hi"}])  # POST /v1/messages?beta=true
    assert len(world.spans(a.rollout_id, 3)) == 3


def test_errors_in_anthropic_shape(world: GatewayWorld) -> None:
    a, other = world.claim(), world.claim()
    client = _client(world, a)
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="m", max_tokens=16, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])
    assert bad.value.body["type"] == "error"  # type: ignore[index]
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert "image" in bad.value.message
    with pytest.raises(anthropic.PermissionDeniedError) as denied:  # a scoped token, another attempt's URL
        anthropic.Anthropic(base_url=rollout_anthropic_base_url(world.url, other.rollout_id, other.attempt_id),
                            api_key=a.token, max_retries=0).messages.create(
            model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert denied.value.body["error"]["type"] == "permission_error"  # type: ignore[index]
    with pytest.raises(anthropic.PermissionDeniedError):  # a key the server never issued
        anthropic.Anthropic(base_url=world.url, api_key="sk-ant-forged", max_retries=0).messages.create(
            model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    with httpx.Client(base_url=world.url) as http:
        r = http.post("/v1/messages", json={"model": "m", "max_tokens": 16, "messages": []})
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        r = http.post("/v1/messages", headers={"x-api-key": ADMIN},
                      json={"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 400 and r.json()["type"] == "error"
        assert "rollout attempt" in r.json()["error"]["message"]


def test_an_engine_that_only_speaks_chat() -> None:
    engine = FakeEngine()
    engine.tool_call = {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    gateway = Gateway(engine, GatewayConfig(retry_backoff=0.01))
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        world = GatewayWorld(url, engine, gateway)
        a = world.claim()
        client = _client(world, a)
        answer = client.messages.create(model="m", max_tokens=64, tools=TOOLS,  # type: ignore[arg-type]
                                        messages=[{"role": "user", "content": QUESTION}])
        (use,) = answer.content
        assert use.type == "tool_use" and use.id == "toolu_1" and use.input == {"a": 2, "b": 3}
        sent = engine.calls[-1][0]
        assert sent["tools"][0]["function"]["parameters"] == TOOLS[0]["input_schema"]
        engine.tool_call = None  # the fake streams text only
        with client.messages.stream(model="m", max_tokens=64,
                                    messages=[{"role": "user", "content": QUESTION}]) as stream:
            final = stream.get_final_message()
        assert final.content[0].type == "text" and final.content[0].text  # type: ignore[union-attr]
        assert final.stop_reason == "end_turn"
        with pytest.raises(anthropic.APIStatusError) as err:
            client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hi"}])
        assert err.value.status_code == 501
        world.admin.close()
