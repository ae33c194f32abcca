"""The room selector (v0.3 ``examples/apo``) on agentbolt, against a scripted model:
the debugging loop reads back the grader's scores and the messages, and APO (v0.3's
arguments, through ``Trainer``) improves the prompt the scripted model needs.

The scripted model picks rooms *naively* (the first free room that is big enough)
unless its prompt asks it to apply every hard constraint *strictly* — which is what the
scripted editor adds after the scripted critic's feedback. The naive choice is right on
2 of the 4 tasks (s3, s4), the strict one on all of them; training gets s1 and s3,
validation s2 and s4.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import pytest

from tests.compat.programs import room_selector as program
from tests.compat.scripted_openai import last_user

_REQUEST = re.compile(
    r"on (\S+) at (\S+) for (\d+) minutes, (\d+) attendees\. Needs: (\[.*?\])\. Accessible required: (True|False)"
)
STRICT = "Apply every hard constraint strictly."


def _requirement(text: str) -> dict[str, Any]:
    m = _REQUEST.search(text)
    assert m is not None, text
    return {"date": m[1], "time": m[2], "duration_min": int(m[3]), "attendees": int(m[4]),
            "needs": ast.literal_eval(m[5]), "accessible": m[6] == "True", "strict": STRICT in text}


def _choose(rooms: list[dict[str, Any]], req: dict[str, Any]) -> str:
    fits = [r for r in rooms if r["free"] and r["capacity"] >= req["attendees"]]
    if req["strict"]:
        fits = [r for r in fits if set(req["needs"]) <= set(r["equipment"]) and (r["accessible"] or not req["accessible"])]
        fits.sort(key=lambda r: (r["capacity"] - req["attendees"], len(r["equipment"]) - len(req["needs"]),
                                 r["distance_m"], len(r["booked"])))
    return fits[0]["id"] if fits else "No Room"


def model(body: dict[str, Any]) -> str | dict[str, Any]:
    """Agent, judge, critic and editor, told apart by their requests."""
    messages = body["messages"]
    user = last_user(body)
    if body.get("response_format"):  # the grader
        output = user.split("Task output:\n", 1)[1].split("\n\nTask expected answer:\n", 1)
        got, expected = output[0], output[1].split("\n\n", 1)[0]
        return json.dumps({"reason": "exact match" if expected in got else "wrong room",
                           "score": 1.0 if expected in got else 0.0})
    if "<current_template>" in user and "<feedback>" in user:  # APO's editor
        template = user.split("<current_template>\n", 1)[1].split("\n</current_template>", 1)[0]
        return f"```\n{template} {STRICT}\n```"
    if "<current_template>" in user:  # APO's critic
        return "The agent ignores equipment and accessibility; the prompt must demand every hard constraint."
    req = _requirement(next(m["content"] for m in messages if m["role"] == "user"))
    if body.get("tools"):
        args = {"date": req["date"], "time": req["time"], "duration_min": req["duration_min"]}
        return {"content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_rooms_and_availability", "arguments": json.dumps(args)}}]}
    rooms = json.loads(messages[-1]["content"])["rooms"]
    return f"final_choice: {_choose(rooms, req)}\nreason: scripted"


async def test_debugging_loop_reads_back_the_grader_scores_and_messages(openai_script: Any) -> None:
    server = openai_script(model)
    results = await program.debug_room_selector()
    assert [(task_id, reward) for task_id, reward, _ in results] == [
        ("s1", 0.0), ("s3", 1.0), ("s2", 0.0), ("s4", 1.0)]
    for _, _, records in results:
        assert len(records) == 3  # tool call, final answer, the judge
        roles = [m["role"] for m in records[1]["messages"]]
        assert roles[:2] == ["system", "user"] and "tool" in roles
        assert records[0]["messages"][-1]["tool_calls"][0]["function"]["name"] == "get_rooms_and_availability"
    assert len(server.calls) == 12


@pytest.mark.parametrize("resources_on_the_algorithm", [False, True], ids=["trainer", "set_initial_resources"])
def test_apo_improves_the_prompt_against_the_scripted_critic(openai_script: Any, tmp_path: Any,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             resources_on_the_algorithm: bool) -> None:
    from tests.compat.programs import room_selector_apo

    monkeypatch.chdir(tmp_path)  # APO keeps its run files under ./runs
    openai_script(model)
    result = room_selector_apo.main(resources_on_the_algorithm=resources_on_the_algorithm)
    assert STRICT in result.best_prompt.template
    assert result.before.mean_reward == pytest.approx(0.5)
    assert result.after.mean_reward == pytest.approx(1.0)
