"""The Messages API's translation to chat and back, on its own: how stop reasons are
named, how content blocks become chat messages, and what is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbolt.engines.engine import EngineError
from agentbolt.gateway.messages.translate import chat_request, content_blocks, stop_of


def _never() -> str | None:
    raise AssertionError("the sampled text is only read to tell stop sequences apart")


def test_stop_reasons() -> None:
    assert stop_of("length", ["END"], None, _never) == ("max_tokens", None)
    assert stop_of("tool_calls", [], None, _never) == ("tool_use", None)
    assert stop_of("stop", [], None, _never) == ("end_turn", None)
    assert stop_of("stop", ["END", "###"], "###", _never) == ("stop_sequence", "###")  # the engine said which
    # the model stops at the first stop sequence it writes: that one is named
    assert stop_of("stop", ["END", "###"], None, lambda: "fine ### then END") == ("stop_sequence", "###")
    assert stop_of("stop", ["END"], None, lambda: "no stop string<eos>") == ("end_turn", None)


def test_blocks_become_chat_messages() -> None:
    chat, dropped = chat_request({
        "model": "m", "max_tokens": 10, "stop_sequences": ["END"], "temperature": 0.5, "top_k": 5,
        "system": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "tools": [{"name": "f", "input_schema": {"type": "object"}}, {"type": "bash_20250124", "name": "bash"}],
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "let me see"},
                                              {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": [{"type": "text", "text": "r"}]},
                                         {"type": "text", "text": "and?"}]},
        ],
    })
    assert chat["messages"] == [
        {"role": "system", "content": "A\nB"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "let me see", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "r"},
        {"role": "user", "content": "and?"},
    ]
    assert chat["tool_choice"] == "required" and chat["parallel_tool_calls"] is False
    assert chat["stop"] == ["END"] and chat["max_tokens"] == 10 and chat["top_k"] == 5
    assert [t["function"]["name"] for t in chat["tools"]] == ["f"] and dropped == ["bash_20250124:bash"]


def test_answer_blocks() -> None:
    message = {"content": "ok", "tool_calls": [{"id": "call_7", "function": {"name": "f", "arguments": '{"x": 1}'}}]}
    assert content_blocks(message) == [{"type": "text", "text": "ok"},
                                       {"type": "tool_use", "id": "toolu_7", "name": "f", "input": {"x": 1}}]


@pytest.mark.parametrize("body", [
    {"messages": []},
    {"messages": [{"role": "tool", "content": "x"}]},
    {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
    {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "any"}},
    {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"name": 5, "input_schema": {"type": "object"}}]},
    {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]}]},
    {"system": {"text": "x"}, "messages": [{"role": "user", "content": "x"}]},
])
def test_refused_with_a_400_in_anthropic_shape(body: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(EngineError) as err:
        chat_request(body)
    assert err.value.status_code == 400 and err.value.body["error"]["type"] == "invalid_request_error"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "role", "content", "text", "name", "input", "tool_use_id", "input_schema",
                         "thinking", "source", "data", "id"]), inner, max_size=4),
    max_leaves=12,
)
_BLOCK = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(["text", "tool_use", "tool_result", "thinking", "redacted_thinking",
                                        "document", "image"]), _JSON)},
    optional={k: _JSON for k in ("text", "name", "input", "content", "source", "thinking", "id", "tool_use_id")},
)
_BODY = st.fixed_dictionaries(
    {"messages": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool"]),
                                                 "content": st.one_of(st.lists(_BLOCK, max_size=3), _JSON)}),
                          max_size=3)},
    optional={k: _JSON for k in ("system", "tools", "tool_choice", "max_tokens", "stop_sequences")},
)


@settings(max_examples=300, deadline=None)
@given(_BODY)
def test_any_body_is_a_chat_request_or_a_400_never_a_crash(body: dict) -> None:  # type: ignore[type-arg]
    try:
        chat, _ = chat_request(body)
    except EngineError as err:
        assert err.status_code == 400 and err.body["type"] == "error"
    else:
        assert all(m["role"] in ("system", "user", "assistant", "tool") for m in chat["messages"])
