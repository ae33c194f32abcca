"""Tool calls through the gateway for an engine that takes token ids: the gateway renders
the chat (tools included), the model's hand-written text is parsed into ``tool_calls``
(single, parallel, malformed, streamed), and ``tool_choice`` shapes the prompt."""

from __future__ import annotations

import json

import openai
import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.engines.token_chat import TokenChat
from agentbolt.engines.tools import get_parser
from agentbolt.gateway import GatewayConfig
from agentbolt.models import byte_tokenizer
from gateway.conftest import GatewayWorld
from gateway.scripted_engine import ScriptedEngine

TOOLS = [
    {"type": "function", "function": {"name": "add", "description": "Add two integers",
                                      "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                                      "b": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "weather", "description": "Weather in a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
]
MESSAGES = [{"role": "user", "content": "What is 2 + 3, and the weather in Paris?"}]
ONE = 'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
TWO = ('<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>\n'
       '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>')


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(byte_tokenizer(), [ONE], tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(sampling={"train": {"temperature": 1.0}}, retry_backoff=0.01)


def _client(world: GatewayWorld) -> tuple[openai.OpenAI, str]:
    a = world.claim()
    return openai.OpenAI(base_url=a.base_url, api_key=a.token), a.rollout_id


def _prompt_text(engine: ScriptedEngine, i: int = -1) -> str:
    return engine.tokenizer.decode(engine.prompts[i])


def test_a_tool_call_in_the_models_text_becomes_tool_calls(world: GatewayWorld, engine: ScriptedEngine) -> None:
    client, rid = _client(world)
    answer = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me add.\n"
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 2, "b": 3}
    # the tools reached the prompt (this template ignores `tools`: the parser described them)
    prompt = _prompt_text(engine)
    assert '"name": "add"' in prompt and "Weather in a city" in prompt and prompt.endswith("<|im_start|>assistant\n")
    (span,) = world.spans(rid, 1)
    attrs = span["attributes"]
    assert attrs["agentbolt.llm.prompt_token_ids"] == engine.prompts[0]
    assert attrs["agentbolt.llm.response_token_ids"][-1] == engine.tokenizer.eos_token_id
    assert len(attrs["agentbolt.llm.response_logprobs"]) == len(attrs["agentbolt.llm.response_token_ids"])
    assert attrs["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert attrs["agentbolt.llm.prompt_source"] == "fresh"
    recorded = json.loads(attrs["agentbolt.llm.response"])["choices"][0]["message"]
    assert recorded["tool_calls"][0]["function"]["name"] == "add"


def test_parallel_calls_stream_as_tool_call_deltas(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = [TWO]
    client, rid = _client(world)
    calls: dict[int, dict[str, str]] = {}
    finish, content = None, ""
    for chunk in client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS, stream=True):
        for c in chunk.choices:
            content += c.delta.content or ""
            for d in c.delta.tool_calls or ():
                acc = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                acc["id"] += d.id or ""
                acc["name"] += (d.function.name or "") if d.function else ""
                acc["arguments"] += (d.function.arguments or "") if d.function else ""
            finish = c.finish_reason or finish
    assert finish == "tool_calls" and content == ""
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        ("add", {"a": 2, "b": 3}), ("weather", {"city": "Paris"})]
    (span,) = world.spans(rid, 1)
    attrs = span["attributes"]
    message = json.loads(attrs["agentbolt.llm.response"])["choices"][0]["message"]
    assert [c["id"] for c in message["tool_calls"]] == [c["id"] for c in calls.values()]
    ids = [*engine.tokenizer(TWO, add_special_tokens=False)["input_ids"], engine.tokenizer.eos_token_id]
    assert attrs["agentbolt.llm.response_token_ids"] == ids  # every sampled id, though the text was held back
    assert len(attrs["agentbolt.llm.response_logprobs"]) == len(ids)


def test_malformed_calls_come_back_as_text(world: GatewayWorld, engine: ScriptedEngine) -> None:
    bad = '<tool_call>\n{"name": "add", "arguments": {"a": 2,\n</tool_call>'
    engine.replies = [bad]
    client, _ = _client(world)
    choice = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS).choices[0]
    assert choice.message.content == bad and not choice.message.tool_calls and choice.finish_reason == "stop"
    text = ""
    for chunk in client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS, stream=True):
        assert not any(c.delta.tool_calls for c in chunk.choices)
        text += "".join(c.delta.content or "" for c in chunk.choices)
    assert text == bad


def test_tool_choice_none_leaves_tools_out_and_parses_nothing(world: GatewayWorld, engine: ScriptedEngine) -> None:
    client, _ = _client(world)
    choice = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS,
                                            tool_choice="none").choices[0]
    assert choice.message.content == ONE and not choice.message.tool_calls
    assert "Weather in a city" not in _prompt_text(engine)


def test_tool_choice_required_forces_the_start_of_a_call(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = ['{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>']
    client, _rid = _client(world)
    choice = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS,
                                            tool_choice="required").choices[0]
    assert _prompt_text(engine).endswith("<|im_start|>assistant\n" + get_parser("hermes").forced_prefix(None))
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls[0].function.name == "weather"
    assert choice.message.content is None


def test_a_named_tool_choice_forces_that_function(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = ['{"a": 2, "b": 3}}\n</tool_call>']
    client, _ = _client(world)
    choice = client.chat.completions.create(
        model="policy", messages=MESSAGES, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}}
    ).choices[0]
    assert _prompt_text(engine).endswith('<tool_call>\n{"name": "add", "arguments": ')
    (call,) = choice.message.tool_calls
    assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 2, "b": 3}
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS,
                                       tool_choice={"type": "function", "function": {"name": "nope"}})
    with pytest.raises(openai.BadRequestError, match="needs tools"):
        client.chat.completions.create(model="policy", messages=MESSAGES, tool_choice="required")


def test_a_named_function_with_one_required_argument_gets_it_opened(world: GatewayWorld,
                                                                   engine: ScriptedEngine) -> None:
    city = {"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    engine.replies = ['Paris"}}\n</tool_call>']
    client, _ = _client(world)
    named = {"type": "function", "function": {"name": "weather"}}
    choice = client.chat.completions.create(model="policy", messages=MESSAGES, tools=[city],
                                            tool_choice=named).choices[0]
    assert _prompt_text(engine).endswith('<tool_call>\n{"name": "weather", "arguments": {"city": "')
    (call,) = choice.message.tool_calls
    assert call.function.name == "weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    # an optional sole argument (TOOLS' weather), or several, are left to the model
    engine.replies = ['{"city": "Paris"}}\n</tool_call>']
    client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS,
                                   tool_choice={"type": "function", "function": {"name": "weather"}})
    assert _prompt_text(engine).endswith('<tool_call>\n{"name": "weather", "arguments": ')


@pytest.mark.parametrize("stream", [False, True])
def test_parallel_tool_calls_false_keeps_the_first_in_text_ids_and_history(world: GatewayWorld,
                                                                          engine: ScriptedEngine, stream: bool) -> None:
    """The answer is cut right after the first call: the call served, the ids recorded (and
    trained) and the ids the next prompt continues from agree (before: the ids held both calls,
    so the model's own history showed a call whose result never came)."""
    engine.replies = [TWO, "It is 5."]
    client, rid = _client(world)
    first_call = TWO[: TWO.index("</tool_call>") + len("</tool_call>")]
    kept = engine.tokenizer(first_call, add_special_tokens=False)["input_ids"]
    kw = {"model": "policy", "messages": MESSAGES, "tools": TOOLS, "parallel_tool_calls": False}
    if stream:
        names = []
        for chunk in client.chat.completions.create(stream=True, **kw):
            for d in (chunk.choices[0].delta.tool_calls or ()) if chunk.choices else ():
                names.append(d.function.name)
        call_id, args = "call_1", '{"a": 2, "b": 3}'
    else:
        choice = client.chat.completions.create(**kw).choices[0]
        names = [c.function.name for c in choice.message.tool_calls]
        assert choice.model_extra["token_ids"] == kept and choice.finish_reason == "tool_calls"
        call_id, args = choice.message.tool_calls[0].id, choice.message.tool_calls[0].function.arguments
    assert [n for n in names if n] == ["add"]
    (span,) = world.spans(rid, 1)
    attrs = span["attributes"]
    assert attrs["agentbolt.llm.response_token_ids"] == kept  # trained: the first call's tokens only
    assert len(attrs["agentbolt.llm.response_logprobs"]) == len(kept)
    follow = [*MESSAGES, {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "add", "arguments": args}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "5"}]
    client.chat.completions.create(model="policy", messages=follow, tools=TOOLS, parallel_tool_calls=False)
    p1, p2 = engine.prompts
    assert p2[: len(p1) + len(kept)] == p1 + kept  # the history continues from exactly those ids
    tail = engine.tokenizer.decode(p2[len(p1) + len(kept):])
    assert tail.startswith("<|im_end|>\n<|im_start|>tool\n5<|im_end|>") and "weather" not in tail
    assert world.spans(rid, 2)[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"


def test_earlier_calls_are_written_in_the_parsers_format(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = ["It is 5."]
    client, _ = _client(world)
    history = [*MESSAGES,
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": "call_9", "type": "function",
                                "function": {"name": "add", "arguments": '{"a":2,"b":3}'}}]},
               {"role": "tool", "tool_call_id": "call_9", "content": "5"}]
    client.chat.completions.create(model="policy", messages=history, tools=TOOLS)
    prompt = _prompt_text(engine)
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>' in prompt
    assert "<|im_start|>tool\n5<|im_end|>" in prompt


def test_a_refused_streamed_request_is_a_400_and_recorded(world: GatewayWorld, engine: ScriptedEngine) -> None:
    client, rid = _client(world)
    with pytest.raises(openai.BadRequestError, match="not among the tools"):
        client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS, stream=True,
                                       tool_choice={"type": "function", "function": {"name": "nope"}})
    (span,) = world.spans(rid, 1)
    assert span["status"] == "error" and span["attributes"]["http.response.status_code"] == 400
    assert engine.prompts == []  # nothing reached the engine


@pytest.mark.parametrize(("parser", "one", "two"), [
    ("llama3_json", '{"name": "add", "parameters": {"a": 2, "b": 3}}',
     '{"name": "add", "parameters": {"a": 2, "b": 3}}; {"name": "weather", "parameters": {"city": "Paris"}}'),
    ("xlam", '<tool_call>[{"name": "add", "arguments": {"a": 2, "b": 3}}]</tool_call>',
     ('<tool_call>[{"name": "add", "arguments": {"a": 2, "b": 3}}, '
     '{"name": "weather", "arguments": {"city": "Paris"}}]</tool_call>')),
])
def test_each_parser_behind_the_gateway(world: GatewayWorld, engine: ScriptedEngine, parser: str, one: str,
                                        two: str) -> None:
    world.gateway.token_chat = TokenChat(engine, engine.tokenizer, parser, world.gateway.history)
    engine.replies = [one, two, two]
    client, _ = _client(world)
    single = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS).choices[0]
    assert single.finish_reason == "tool_calls" and [c.function.name for c in single.message.tool_calls] == ["add"]
    parallel = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS).choices[0]
    assert [c.function.name for c in parallel.message.tool_calls] == ["add", "weather"]
    names: dict[int, str] = {}
    for chunk in client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS, stream=True):
        for d in (chunk.choices[0].delta.tool_calls or ()) if chunk.choices else ():
            names[d.index] = names.get(d.index, "") + (d.function.name or "")
    assert list(names.values()) == ["add", "weather"]
