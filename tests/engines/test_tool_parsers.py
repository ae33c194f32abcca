"""Tool-call parsers on hand-written model outputs: single and parallel calls, malformed
output (stays text), streaming (held back, reassembled), forced starts, formatting."""

from __future__ import annotations

import json

import pytest

from agentbolt.engines.tools import (
    PARSERS,
    ToolCallStream,
    default_parser_name,
    get_parser,
)

ADD = {"a": 2, "b": 3}
WEATHER = {"city": "Paris"}

# parser -> (one call, two calls, malformed outputs)
OUTPUTS = {
    "hermes": (
        'Let me add.\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
        ('<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>\n'
        '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>'),
        ['<tool_call>\n{"name": "add", "arguments": {"a": 2,\n</tool_call>',
         '<tool_call>\n{"arguments": {"a": 2}}\n</tool_call>',
         '<tool_call>{"name": "add", "arguments": {}}</tool_call> and then some prose'],
    ),
    "llama3_json": (
        '{"name": "add", "parameters": {"a": 2, "b": 3}}',
        ('<|python_tag|>{"name": "add", "parameters": {"a": 2, "b": 3}}; '
        '{"name": "weather", "parameters": {"city": "Paris"}}'),
        ['{"name": "add", "parameters": {"a": 2', '{"name": "add", "parameters": 5}',
         '{"name": "add", "parameters": {}} is what I would call'],
    ),
    "xlam": (
        '<tool_call>[{"name": "add", "arguments": {"a": 2, "b": 3}}]</tool_call>',
        ('<tool_call>[{"name": "add", "arguments": {"a": 2, "b": 3}}, '
        '{"name": "weather", "arguments": {"city": "Paris"}}]</tool_call>'),
        ['<tool_call>[{"name": "add", "arguments": {"a": 2}]</tool_call>', '<tool_call>[]</tool_call>',
         '[{"name": 3}]'],
    ),
}


def _calls(parsed):  # type: ignore[no-untyped-def]
    return [(c.name, json.loads(c.arguments)) for c in parsed.calls]


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_one_call(name: str) -> None:
    parsed = get_parser(name).parse(OUTPUTS[name][0])
    assert _calls(parsed) == [("add", ADD)]
    assert all(c.id.startswith("call_") and len(c.id) == 29 for c in parsed.calls)
    if name == "hermes":
        assert parsed.content == "Let me add.\n"  # text before the call is the content
    else:
        assert parsed.content is None


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_parallel_calls(name: str) -> None:
    parsed = get_parser(name).parse(OUTPUTS[name][1])
    assert _calls(parsed) == [("add", ADD), ("weather", WEATHER)]
    assert len({c.id for c in parsed.calls}) == 2


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_malformed_output_stays_text(name: str) -> None:
    for text in OUTPUTS[name][2]:
        parsed = get_parser(name).parse(text)
        assert parsed.calls == [] and parsed.content == text, text


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_plain_text_is_content(name: str) -> None:
    text = "The answer is 5. Braces { are fine } in prose."
    assert get_parser(name).parse(text).content == text


def _stream(name: str, text: str, size: int, prefix: str = "") -> tuple[str, list[tuple[str, object]], list[str]]:
    stream = ToolCallStream(get_parser(name), prefix)
    shown = [stream.feed(text[i:i + size]) for i in range(0, len(text), size)]
    rest, parsed = stream.finish()
    return "".join(shown) + rest, _calls(parsed), shown


@pytest.mark.parametrize("name", sorted(OUTPUTS))
@pytest.mark.parametrize("size", [1, 4, 1000])
def test_streaming_reassembles_to_the_same_answer(name: str, size: int) -> None:
    for text in (OUTPUTS[name][0], OUTPUTS[name][1], *OUTPUTS[name][2], "Just text, no call."):
        content, calls, _ = _stream(name, text, size)
        parsed = get_parser(name).parse(text)
        assert calls == _calls(parsed)
        assert content == (parsed.content or "")


def test_streaming_sends_prose_before_a_call_at_once_and_holds_the_call() -> None:
    text = OUTPUTS["hermes"][0]
    _, _, shown = _stream("hermes", text, 1)
    before = text.index("<tool_call>")
    assert "".join(shown) == "Let me add.\n"  # sent while streaming; the call is held back
    assert "".join(shown[:before]) == text[:before]


def test_llama3_json_streams_prose_but_holds_a_leading_brace() -> None:
    _, _, shown = _stream("llama3_json", "Sure: 2 + 3 = 5", 1)
    assert "".join(shown) == "Sure: 2 + 3 = 5"
    _, _, shown = _stream("llama3_json", OUTPUTS["llama3_json"][0], 1)
    assert "".join(shown) == ""


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_formatted_calls_parse_back(name: str) -> None:
    parser = get_parser(name)
    calls = [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": json.dumps(ADD)}},
             {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": json.dumps(WEATHER)}}]
    assert _calls(parser.parse(parser.format_calls(calls))) == [("add", ADD), ("weather", WEATHER)]


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_forced_start_plus_the_rest_parses(name: str) -> None:
    parser = get_parser(name)
    whole = parser.format_calls([{"function": {"name": "add", "arguments": json.dumps(ADD)}}])
    for prefix in (parser.forced_prefix(None), parser.forced_prefix("add")):
        assert whole.startswith(prefix)  # the forced start is how the parser's own calls begin
        content, calls, shown = _stream(name, whole[len(prefix):], 2, prefix)
        assert calls == [("add", ADD)] and content == "" and not any(shown)


def test_unknown_parser_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="hermes"):
        get_parser("nope")


def test_default_parser_from_the_chat_template() -> None:
    assert default_parser_name("{{ '<tool_call>' }}{% if tools %}{% endif %}") == "hermes"
    assert default_parser_name("<|python_tag|>{{ tools }}<|eot_id|>") == "llama3_json"
    smollm2 = "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face' }}"
    assert default_parser_name(smollm2) == "xlam"
    assert default_parser_name("{{ messages }}") == "hermes"
