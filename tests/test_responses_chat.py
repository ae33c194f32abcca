"""Responses API items read as chat messages, by one translation for the gateway and for
a recorded call's span attributes. Pinned here: the cases where the two translations
they used to have disagreed (``call_attributes`` kept ``developer``, split a turn's text
from its calls, wrote a dict output as Python's repr, dropped custom tool calls and
their outputs, and kept an empty ``instructions``), decided as the Responses API means them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentbolt.call_attributes import call_attributes
from agentbolt.engines.engine import EngineError
from agentbolt.gateway.responses.items import output_items
from agentbolt.gateway.responses.translate import chat_request
from agentbolt.responses_chat import (
    UnsupportedItemError,
    input_messages,
    instruction_messages,
    output_message,
)

ONE_TURN = [
    {"type": "message", "role": "developer", "content": "Answer in French."},
    {"role": "user", "content": [{"type": "input_text", "text": "Weather "}, {"type": "input_text", "text": "Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "use the tool"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Paris"}'},
    {"type": "function_call", "id": "fc_2", "name": "clock", "arguments": ""},
    {"type": "function_call_output", "call_id": "call_1", "output": {"temp": 21}},
    {"type": "function_call_output", "call_id": "fc_2", "output": [{"type": "input_text", "text": "noon"}]},
    {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": "*** Begin Patch"},
    {"type": "custom_tool_call_output", "call_id": "call_3", "output": "Done!"},
]

EXPECTED = [
    {"role": "system", "content": "Answer in French."},  # developer: the role a chat template renders
    {"role": "user", "content": "Weather Paris?"},  # input_text parts joined; the reasoning item skipped
    {"role": "assistant", "content": "Let me look.", "tool_calls": [  # one turn: its text and its calls
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
        {"id": "fc_2", "type": "function", "function": {"name": "clock", "arguments": "{}"}},  # no call_id: its id
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},  # JSON, not Python's repr
    {"role": "tool", "tool_call_id": "fc_2", "content": "noon"},  # a list output: its text parts
    {"role": "assistant", "content": None, "tool_calls": [  # a custom tool's input is its one argument
        {"id": "call_3", "type": "function", "function": {"name": "apply_patch",
                                                          "arguments": '{"input": "*** Begin Patch"}'}},
    ]},
    {"role": "tool", "tool_call_id": "call_3", "content": "Done!"},
]


def test_the_items_of_one_conversation_become_its_chat_messages() -> None:
    assert input_messages(ONE_TURN) == EXPECTED
    assert input_messages(ONE_TURN, strict=True) == EXPECTED


def test_the_gateway_and_a_recorded_call_read_a_request_alike() -> None:
    body = {"model": "m", "instructions": "Be brief.", "input": ONE_TURN}
    chat, _ = chat_request(body, [])
    _, attrs = call_attributes(body, None, system="openai")
    recorded = json.loads(attrs["agentbolt.llm.request"])["messages"]
    assert recorded == chat["messages"] == [{"role": "system", "content": "Be brief."}, *EXPECTED]


def test_a_string_input_is_one_user_message_and_empty_instructions_none() -> None:
    assert input_messages("hi") == [{"role": "user", "content": "hi"}]
    assert instruction_messages("") == instruction_messages(None) == []
    _, attrs = call_attributes({"model": "m", "instructions": "", "input": "hi"}, None, system="openai")
    assert json.loads(attrs["agentbolt.llm.request"])["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("items", "refused", "lenient"),
    [
        ([{"type": "web_search_call", "id": "ws_1", "status": "completed"}], "'web_search_call' are not supported", []),
        ([{"role": "user", "content": [{"type": "input_image", "image_url": "data:..."}]}], "'input_image'",
         [{"role": "user", "content": ""}]),
        ({"role": "user"}, "must be a string or a list", []),
        (["hi"], "must be an object", []),
    ],
)
def test_what_has_no_chat_form_is_refused_strictly_and_skipped_leniently(items: Any, refused: str,
                                                                         lenient: list[dict[str, Any]]) -> None:
    with pytest.raises(UnsupportedItemError, match=refused):
        input_messages(items, strict=True)
    assert input_messages(items) == lenient  # a recorder never fails on a call it cannot read whole


def test_the_gateway_answers_what_it_cannot_render_with_a_400_on_input() -> None:
    with pytest.raises(EngineError) as err:
        chat_request({"model": "m", "input": [{"type": "computer_call", "id": "cu_1"}]}, [])
    assert err.value.status_code == 400 and err.value.body["error"]["param"] == "input"


def test_a_namespaced_call_gets_the_name_the_prompt_shows() -> None:
    item = {"type": "function_call", "call_id": "c", "name": "spawn", "namespace": "agents", "arguments": "{}"}
    messages = input_messages([item], prompt_name=lambda ns, name: f"{ns}__{name}" if ns else name)
    assert messages[0]["tool_calls"][0]["function"]["name"] == "agents__spawn"
    assert input_messages([item])[0]["tool_calls"][0]["function"]["name"] == "spawn"


def test_an_answer_read_back_from_its_output_items_is_the_chat_answer() -> None:
    answer = {"role": "assistant", "content": "Let me look.",
              "tool_calls": [{"id": "call_1", "type": "function",
                              "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]}
    assert output_message(output_items(answer, [])) == answer
    custom = [{"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": "x"}]
    assert output_message(custom)["tool_calls"] == [
        {"id": "call_3", "type": "function", "function": {"name": "apply_patch", "arguments": '{"input": "x"}'}}]
    assert output_message([{"type": "reasoning", "summary": []}]) == {"role": "assistant", "content": None}


def test_a_recorded_response_gets_the_chat_choice_its_status_says() -> None:
    output = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Bon"}]}]
    for status, details, finish in (("completed", None, "stop"),
                                    ("incomplete", {"reason": "max_output_tokens"}, "length"),
                                    ("incomplete", {"reason": "content_filter"}, "content_filter")):
        response = {"id": "resp_1", "object": "response", "status": status, "incomplete_details": details,
                    "output": output}
        _, attrs = call_attributes({"model": "m", "input": "hi"}, response, system="openai")
        (choice,) = json.loads(attrs["agentbolt.llm.response"])["choices"]
        assert choice == {"index": 0, "message": {"role": "assistant", "content": "Bon"}, "finish_reason": finish}
