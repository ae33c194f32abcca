"""The Messages API's translation to chat and back, on its own: how stop reasons are
named, how content blocks become chat messages, and what is refused."""

from __future__ import annotations

import pytest

from agentbolt.gateway.engine import EngineError
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
])
def test_refused_with_a_400_in_anthropic_shape(body: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(EngineError) as err:
        chat_request(body)
    assert err.value.status_code == 400 and err.value.body["error"]["type"] == "invalid_request_error"
