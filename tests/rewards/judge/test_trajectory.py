"""What a judge is shown of a rollout: its conversation read back from the recorded model
calls (a call that continues the conversation replaces it; one that does not is kept
beside it), its recorded tool calls and output, long texts cut in the middle, and all of
it as JSON inside a block fenced by a marker the data does not contain."""

from __future__ import annotations

import orjson

from agentbolt import semconv
from agentbolt.rewards.judge import Trajectory
from agentbolt.rewards.judge.trajectory import MAX_TEXT_CHARS, quote
from agentbolt.types import Span

from rewards.judge.groups import call_span

Q = {"role": "user", "content": "17 * 3?"}


def test_a_follow_up_call_continues_the_conversation_and_a_sub_agents_call_is_kept_beside_it() -> None:
    first = call_span("r", "a", [Q], "CALC(17 * 3)", 1.0)
    second = call_span("r", "a", [Q, {"role": "assistant", "content": "CALC(17 * 3)"},
                                  {"role": "user", "content": "Result: 51"}], "ANSWER: 51", 2.0)
    helper = call_span("r", "a", [{"role": "user", "content": "check 51"}], "looks right", 3.0)

    trajectory = Trajectory.from_spans("r", [helper, second, first], task={"q": 1})

    assert [m["content"] for m in trajectory.messages] == [
        "17 * 3?", "CALC(17 * 3)", "Result: 51", "ANSWER: 51", "check 51", "looks right"]
    assert trajectory.task == {"q": 1}


def test_tool_calls_and_the_output_are_read_from_their_spans() -> None:
    tool = Span(rollout_id="r", attempt_id="a", name="execute_tool evaluate", start_time=1.5, attributes={
        semconv.GEN_AI_OPERATION: semconv.EXECUTE_TOOL, semconv.GEN_AI_TOOL_NAME: "evaluate",
        semconv.GEN_AI_TOOL_CALL_ARGUMENTS: '{"expression": "17 * 3"}', semconv.GEN_AI_TOOL_CALL_RESULT: '{"text": "51"}',
        semconv.MCP_IS_ERROR: False})
    output = Span(rollout_id="r", attempt_id="a", name=semconv.OUTPUT_SPAN, start_time=4.0,
                  attributes={semconv.OUTPUT_JSON: '{"answer": 51}'})

    data = Trajectory.from_spans("r", [call_span("r", "a", [Q], "51", 1.0), tool, output]).as_data()

    assert data["tool_calls_recorded_by_agentbolt"] == [
        {"tool": "evaluate", "arguments": {"expression": "17 * 3"}, "result": {"text": "51"}}]
    assert data["final_output"] == {"answer": 51}


def test_long_texts_keep_their_head_and_tail() -> None:
    text = "a" * MAX_TEXT_CHARS + "b" * 100
    (shown,) = Trajectory.from_messages([{"role": "assistant", "content": text}]).as_data()["conversation"]
    assert shown["content"].startswith("a" * 100) and shown["content"].endswith("b" * 100)
    assert "[… 100 characters left out …]" in shown["content"] and len(shown["content"]) < len(text)


def test_the_data_block_is_json_between_lines_holding_a_marker_found_nowhere_in_it() -> None:
    block, marker = quote({"trajectory": {"content": "<<<DATA-0000\nend>>>"}})
    opening, *body, closing = block.split("\n")
    assert opening == f"<<<{marker}" and closing == f"{marker}>>>"
    assert orjson.loads("\n".join(body)) == {"trajectory": {"content": "<<<DATA-0000\nend>>>"}}
    assert block.count(marker) == 2
    assert quote({})[1] != marker  # drawn per call
