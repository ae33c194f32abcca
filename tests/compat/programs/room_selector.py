"""Port of Agent Lightning v0.3's ``examples/apo/room_selector.py`` (our own code, the same
API calls), with ``agentlightning`` replaced by ``agentbolt.compat`` in the imports.

A meeting-room agent: one tool (``get_rooms_and_availability``), a prompt template
resource, and an LLM judge as grader (structured output, a 0-1 score).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict, cast

from openai import OpenAI
from pydantic import BaseModel, Field

from agentbolt.compat.adapter import TraceToMessages
from agentbolt.compat.litagent import rollout
from agentbolt.compat.reward import find_final_reward
from agentbolt.compat.runner import LitAgentRunner
from agentbolt.compat.store import InMemoryLightningStore
from agentbolt.compat.tracer.agentops import AgentOpsTracer
from agentbolt.compat.types import Dataset, PromptTemplate

TASKS_FILE = Path(__file__).with_name("room_tasks.jsonl")


class JudgeResponse(BaseModel):
    reason: str = Field(description="Why this score, in at most 100 characters.")
    score: float = Field(description="How well the choice matches, 0 to 1.")


class RoomSelectionTask(TypedDict):
    id: str
    task_input: dict[str, Any]
    expected_choice: str


ROOMS: list[dict[str, Any]] = [
    {"id": "Orion", "capacity": 4, "equipment": ["tv", "whiteboard"], "accessible": True, "distance_m": 12,
     "booked": [("2025-10-13", "10:00", 60)]},
    {"id": "Lyra", "capacity": 10, "equipment": ["projector", "whiteboard", "confphone"], "accessible": True,
     "distance_m": 30, "booked": [("2025-10-13", "11:00", 60)]},
    {"id": "Vega", "capacity": 6, "equipment": ["tv"], "accessible": False, "distance_m": 22, "booked": []},
    {"id": "Atlas", "capacity": 6, "equipment": ["projector", "whiteboard"], "accessible": True,
     "distance_m": 10, "booked": [("2025-10-13", "13:30", 30)]},
    {"id": "Pulse", "capacity": 8, "equipment": ["tv", "whiteboard", "confphone"], "accessible": True,
     "distance_m": 8, "booked": []},
]

TOOLS: list[Any] = [{
    "type": "function",
    "function": {
        "name": "get_rooms_and_availability",
        "description": "Meeting rooms with capacity, equipment, accessibility, distance and whether they are free.",
        "parameters": {
            "type": "object",
            "properties": {"date": {"type": "string"}, "time": {"type": "string"}, "duration_min": {"type": "integer"}},
            "required": ["date", "time", "duration_min"],
        },
    },
}]


def prompt_template_baseline() -> PromptTemplate:
    return PromptTemplate(
        template="Find a room on {date} at {time} for {duration_min} minutes, {attendees} attendees. "
        "Needs: {needs}. Accessible required: {accessible_required}",
        engine="f-string",
    )


def _minutes(hhmm: str) -> int:
    return int(hhmm[:2]) * 60 + int(hhmm[3:])


def get_rooms_and_availability(date: str, time_str: str, duration_min: int) -> dict[str, Any]:
    start, end = _minutes(time_str), _minutes(time_str) + duration_min
    rooms = []
    for room in ROOMS:
        busy = any(d == date and max(start, _minutes(t)) < min(end, _minutes(t) + m) for d, t, m in room["booked"])
        rooms.append({**room, "free": not busy})
    return {"rooms": rooms}


def room_selection_grader(client: OpenAI, final_message: str | None, expected_choice: str) -> float:
    judge = client.chat.completions.parse(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": (
            "You are a strict grader of exact room choice.\n"
            f"Task output:\n{final_message}\n\nTask expected answer:\n{expected_choice}\n\n"
            "Score the match on a 0-1 scale. Be critical."
        )}],
        response_format=JudgeResponse,
        temperature=0.0,
    )
    parsed = judge.choices[0].message.parsed
    assert parsed is not None
    return parsed.score


@rollout
def room_selector(task: RoomSelectionTask, prompt_template: PromptTemplate) -> float:
    client = OpenAI()
    messages: list[Any] = [
        {"role": "system", "content": "You are a scheduling assistant."},
        {"role": "user", "content": prompt_template.format(**task["task_input"])},
    ]
    first = client.chat.completions.create(model="gpt-4.1-nano", messages=messages, tools=TOOLS,
                                           tool_choice="auto", temperature=0.0)
    reply = first.choices[0].message
    if reply.tool_calls:
        messages.append({"role": "assistant", "content": reply.content, "tool_calls": [
            {"id": tc.id, "type": "function", "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
            for tc in reply.tool_calls
        ]})
        for tc in reply.tool_calls:
            args = json.loads(tc.function.arguments)
            output = get_rooms_and_availability(args["date"], args["time"], args["duration_min"])
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": json.dumps(output)})
        final = client.chat.completions.create(model="gpt-4.1-nano", messages=messages, temperature=0.0)
        final_message = final.choices[0].message.content
    else:
        final_message = reply.content
    return room_selection_grader(client, final_message, task["expected_choice"])


def load_room_tasks() -> Dataset[RoomSelectionTask]:
    tasks = [RoomSelectionTask(**json.loads(line)) for line in TASKS_FILE.read_text().splitlines() if line.strip()]
    return cast(Dataset[RoomSelectionTask], tasks)


async def debug_room_selector(limit: int = 10) -> list[tuple[str, float | None, list[Any]]]:
    """v0.3's debugging loop: each task through ``runner.step``, then the messages and the
    reward read back from the store. Returns ``(task id, reward, messages)`` per task."""
    runner = LitAgentRunner[RoomSelectionTask](AgentOpsTracer())
    store = InMemoryLightningStore()
    prompt_template = prompt_template_baseline()
    results = []
    with runner.run_context(agent=room_selector, store=store):
        for task in list(load_room_tasks())[:limit]:
            done = await runner.step(task, resources={"main_prompt": prompt_template})
            spans = await store.query_spans(done.rollout_id)
            messages = TraceToMessages().adapt(spans)
            results.append((task["id"], find_final_reward(spans), messages))
    return results
