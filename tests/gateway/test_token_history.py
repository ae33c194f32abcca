"""Token-exact history: a call that continues an earlier call of its attempt gets that
call's prompt ids + the ids the engine sampled + the new turns; an agent that edits its
history gets the fallback (re-rendering), counted; the training samples merge."""

from __future__ import annotations

import json

import openai
import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.adapters.samples import build_samples
from agentbolt.gateway import GatewayConfig
from agentbolt.models import byte_tokenizer, smollm2_tokenizer
from agentbolt.types import Span
from gateway.conftest import GatewayWorld
from gateway.scripted_engine import ScriptedEngine
from gateway.test_tool_calls_gateway import MESSAGES, TOOLS

# the model writes its arguments with odd spacing; the agent sends them back re-serialised
CALL = '<tool_call>\n{"name": "add", "arguments": {"a":2,   "b":3}}\n</tool_call>'


def _tokenizer():  # type: ignore[no-untyped-def]
    try:
        return smollm2_tokenizer()  # a real BPE: re-rendering really changes tokens
    except Exception:  # noqa: BLE001 - without the model package, bytes still show the mechanism
        return byte_tokenizer()


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(_tokenizer(), [CALL, "2 + 3 = 5. Sunny in Paris."], tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(retry_backoff=0.01)


def _continue(messages: list[dict], answer, result: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """What a framework sends next: the answer (arguments re-serialised) and the tool result."""
    call = answer.choices[0].message.tool_calls[0]
    compact = json.dumps(json.loads(call.function.arguments), separators=(",", ":"))
    assistant = {"role": "assistant", "content": answer.choices[0].message.content,
                 "tool_calls": [{"id": call.id, "type": "function",
                                 "function": {"name": call.function.name, "arguments": compact}}]}
    return [*messages, assistant, {"role": "tool", "tool_call_id": call.id, "content": result}]


def _samples(world: GatewayWorld, rid: str, n: int):  # type: ignore[no-untyped-def]
    spans = [Span.model_validate(s) for s in world.spans(rid, n)]
    return build_samples(extract_model_calls(spans))


def test_a_continuing_call_reuses_the_sampled_token_ids(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS)
    sampled = first.choices[0].model_extra["token_ids"]
    second_messages = _continue(MESSAGES, first, "5")
    client.chat.completions.create(model="policy", messages=second_messages, tools=TOOLS)
    p1, p2 = engine.prompts
    assert p2[: len(p1) + len(sampled)] == p1 + sampled
    assert engine.tokenizer.decode(p2[len(p1) + len(sampled):]).startswith("\n<|im_start|>tool\n5<|im_end|>")
    # what re-rendering the text would have sent instead: other tokens for the model's answer
    rerendered = world.gateway.token_chat.template.prompt_ids(  # type: ignore[union-attr]
        {"messages": second_messages}, world.gateway.token_chat.template.tool_mode({"tools": TOOLS}))  # type: ignore[union-attr]
    assert rerendered[: len(p1) + len(sampled)] != p1 + sampled
    spans = world.spans(a.rollout_id, 2)
    assert [s["attributes"]["agentbolt.llm.prompt_source"] for s in spans] == ["fresh", "token_exact"]
    found = _samples(world, a.rollout_id, 2)
    assert len(found.samples) == 1 and found.merge_rate == 1.0
    assert world.admin.get("/v1/gateway/status").json()["prompts"] == {"token_exact": 1, "rerendered": 0, "fresh": 1}


def test_an_edited_history_falls_back_to_rendering_and_is_counted(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS)
    edited = _continue(MESSAGES, first, "5")
    edited[1]["tool_calls"][0]["function"]["arguments"] = '{"a": 2, "b": 4}'  # the agent rewrote the call
    client.chat.completions.create(model="policy", messages=edited, tools=TOOLS)
    _p1, p2 = engine.prompts
    spans = world.spans(a.rollout_id, 2)
    assert [s["attributes"]["agentbolt.llm.prompt_source"] for s in spans] == ["fresh", "rerendered"]
    assert p2 == world.gateway.token_chat.template.prompt_ids(  # type: ignore[union-attr]
        {"messages": edited}, world.gateway.token_chat.template.tool_mode({"tools": TOOLS}))  # type: ignore[union-attr]
    assert world.gateway.history.stats.rerendered == 1
    found = _samples(world, a.rollout_id, 2)
    assert len(found.samples) == 2  # the edit split the rollout, as it must


def test_history_is_per_attempt_and_needs_the_same_tools(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a, b = world.claim(), world.claim()
    ca = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    cb = openai.OpenAI(base_url=b.base_url, api_key=b.token)
    first = ca.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS)
    cb.chat.completions.create(model="policy", messages=_continue(MESSAGES, first, "5"), tools=TOOLS)
    ca.chat.completions.create(model="policy", messages=_continue(MESSAGES, first, "5"), tools=TOOLS[:1])
    sources = [world.spans(b.rollout_id, 1)[0], *world.spans(a.rollout_id, 2)]
    assert [s["attributes"]["agentbolt.llm.prompt_source"] for s in sources] == ["fresh", "fresh", "rerendered"]


def test_streamed_calls_are_remembered_too(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    parts: dict[str, str] = {"id": "", "name": "", "arguments": ""}
    for chunk in client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS, stream=True):
        for d in (chunk.choices[0].delta.tool_calls or ()) if chunk.choices else ():
            parts["id"] += d.id or ""
            parts["name"] += d.function.name or ""
            parts["arguments"] += d.function.arguments or ""
    assistant = {"role": "assistant", "content": None,
                 "tool_calls": [{"id": parts["id"], "type": "function",
                                 "function": {"name": parts["name"], "arguments": parts["arguments"]}}]}
    messages = [*MESSAGES, assistant, {"role": "tool", "tool_call_id": parts["id"], "content": "5"}]
    client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
    assert world.spans(a.rollout_id, 2)[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    assert len(_samples(world, a.rollout_id, 2).samples) == 1


def test_a_forced_first_call_is_continued_token_exactly(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = ['{"name": "add", "arguments": {"a":2, "b":3}}\n</tool_call>', "It is 5."]
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS, tool_choice="required")
    client.chat.completions.create(model="policy", messages=_continue(MESSAGES, first, "5"), tools=TOOLS)
    p1, p2 = engine.prompts
    sampled = first.choices[0].model_extra["token_ids"]
    assert p2[: len(p1) + len(sampled)] == p1 + sampled  # the forced opening stays where it was
    assert world.spans(a.rollout_id, 2)[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"


def test_an_answer_cut_at_max_tokens_gets_the_turn_end_from_the_template(world: GatewayWorld,
                                                                         engine: ScriptedEngine) -> None:
    engine.replies, engine.eos = ["The sum is", "5."], False
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.chat.completions.create(model="policy", messages=MESSAGES)
    assert first.choices[0].finish_reason == "length"
    follow = [*MESSAGES, {"role": "assistant", "content": "The sum is"}, {"role": "user", "content": "Go on."}]
    client.chat.completions.create(model="policy", messages=follow)
    p1, p2 = engine.prompts
    sampled = first.choices[0].model_extra["token_ids"]
    assert p2[: len(p1) + len(sampled)] == p1 + sampled
    tail = engine.tokenizer.decode(p2[len(p1) + len(sampled):])
    assert tail.startswith("<|im_end|>\n<|im_start|>user\nGo on.<|im_end|>")  # the template closes the turn
    assert world.spans(a.rollout_id, 2)[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
