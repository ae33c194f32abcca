"""MessagesAdapter: OpenAI chat fine-tuning records, one per chat call; to_jsonl."""

from __future__ import annotations

import json
from pathlib import Path

from agentbolt.adapters import MessagesAdapter, to_jsonl

from .spans import Attempt, user

TOOL = {"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": '{"x": "2*3"}'}}


def tool_round_trip() -> Attempt:
    a = Attempt()
    system = {"role": "system", "content": "You can calculate."}
    asked = [system, user("use the calculator: 2*3")]
    a.chat("c1", asked, None, tools=[TOOL], tool_calls=[CALL], agent="solver")
    history = [
        *asked,
        {"role": "assistant", "content": None, "tool_calls": [{**CALL, "index": 0}], "refusal": None},
        {"role": "tool", "tool_call_id": "call_1", "content": "6"},
    ]
    a.chat("c2", history, "It is 6.", tools=[TOOL], agent="solver")
    a.reward(1.0)
    return a


def test_one_record_per_call_with_the_answer_and_tools() -> None:
    first, second = MessagesAdapter().adapt(tool_round_trip().spans)
    assert first == {
        "messages": [
            {"role": "system", "content": "You can calculate."},
            {"role": "user", "content": "use the calculator: 2*3"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
        ],
        "tools": [TOOL],
    }
    assert second["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [CALL], "weight": 0},
        {"role": "tool", "tool_call_id": "call_1", "content": "6"},
        {"role": "assistant", "content": "It is 6."},
    ]


def test_history_can_be_trained_on() -> None:
    _, second = MessagesAdapter(train_on_history=True).adapt(tool_round_trip().spans)
    assert all("weight" not in m for m in second["messages"])


def test_no_tools_no_tools_key() -> None:
    a = Attempt()
    a.chat("c1", [user("hi")], "hello")
    assert MessagesAdapter().adapt(a.spans) == [
        {"messages": [user("hi"), {"role": "assistant", "content": "hello"}]}
    ]


def test_agent_match_and_min_reward_select_records() -> None:
    good, bad = Attempt("ro-1", "at-1"), Attempt("ro-2", "at-2")
    for a, reward in ((good, 1.0), (bad, 0.0)):
        a.chat("p", [user("plan")], "plan", agent="planner")
        a.chat("s", [user("solve")], "answer", agent="solver")
        a.reward(reward)
    unrewarded = Attempt("ro-3", "at-3")
    unrewarded.chat("s", [user("solve")], "answer", agent="solver")
    spans = [*good.spans, *bad.spans, *unrewarded.spans]

    assert len(MessagesAdapter().adapt(spans)) == 5
    assert len(MessagesAdapter(agent_match="solver").adapt(spans)) == 3
    kept = MessagesAdapter(agent_match="solver", min_reward=1.0).adapt(spans)
    assert [r["messages"][0] for r in kept] == [user("solve")]  # only the rewarded attempt's solver call


def test_completions_and_failed_calls_are_not_chat_records() -> None:
    a = Attempt()
    a.completion("c1", "2+2=", "4")
    a.chat("c2", [user("x")], failed=True)
    assert MessagesAdapter().adapt(a.spans) == []


def test_to_jsonl_writes_one_object_per_line(tmp_path: Path) -> None:
    records = MessagesAdapter().adapt(tool_round_trip().spans)
    path = tmp_path / "out" / "sft.jsonl"
    assert to_jsonl(records, path) == 2
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == records
