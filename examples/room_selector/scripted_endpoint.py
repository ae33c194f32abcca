"""A deterministic stand-in for "an OpenAI-compatible endpoint given by the user".

It plays all three parts of an APO run on ``POST /v1/chat/completions`` (real HTTP),
telling them apart by what they are asked:

* **editor** — the request contains the critique below (:data:`CRITIQUE`): it answers
  with the template it was given (in ``<current_template>`` tags or a fenced block),
  with :data:`INSTRUCTION` appended;
* **critic** — the request contains a template with the ``{rooms}`` placeholder: it
  answers :data:`CRITIQUE`, which asks for that instruction;
* **agent** — anything else: a room-selection prompt. If the prompt says "check every
  constraint" it solves the problem (it parses the rooms and the request as ``task.py``
  renders them) and answers ``ROOM: <name>``; otherwise it names the first room listed.

So the initial prompt scores about one in five, and the edited one every problem: the
test of ``optimize.py`` proves the endpoint path end to end without a network or a model.
Run it alone to try ``optimize.py --endpoint`` by hand::

    python examples/room_selector/scripted_endpoint.py --port 8011
    python examples/room_selector/optimize.py --endpoint http://127.0.0.1:8011/v1 --model scripted
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import uvicorn
from fastapi import FastAPI, Request

sys.path.insert(0, str(Path(__file__).resolve().parent))

from task import EQUIPMENT, Room, matching_rooms
from task import Request as RoomRequest

__all__ = ["CRITIQUE", "INSTRUCTION", "ScriptedEndpoint", "answer", "create_app", "serve_scripted_endpoint",
           "solve_prompt"]

INSTRUCTION = ("Check every constraint (seats, equipment, wheelchair access, bookings, floor) against each room "
               "before you answer, then end with a final line ROOM: <name>.")
"""The sentence the critic asks for; an agent prompt holding "check every constraint" gets solved."""

CRITIQUE = (
    "The failing replies picked the first room listed without checking it against the request: the chosen "
    "rooms were too small, booked at that time or missing equipment. Tell the assistant to check every "
    f"constraint and to give its answer in a fixed format. Add this sentence to the prompt: \"{INSTRUCTION}\""
)
"""The critic's reply (its first sentence also marks a request to the editor)."""
_EDITOR_MARK = CRITIQUE[:60]

# ----------------------------------------------------------------------------- the agent part
_ROOM = re.compile(
    r"^- (\w+): floor (\d+), (\d+) seats, equipment: (.*?); wheelchair accessible: (yes|no); booked: (.*)$", re.MULTILINE
)
_SLOT = re.compile(r"(\d\d):(\d\d)-(\d\d):(\d\d)")
_MEETING = re.compile(r"for (\d+) people from (\d\d):(\d\d) to (\d\d):(\d\d)")


def _rooms_of(prompt: str) -> list[Room]:
    rooms = []
    for name, floor, seats, equipment, accessible, booked in _ROOM.findall(prompt):
        slots = tuple((int(a) * 60 + int(b), int(c) * 60 + int(d)) for a, b, c, d in _SLOT.findall(booked))
        kit = tuple(e for e in equipment.split(", ") if e in EQUIPMENT)
        rooms.append(Room(name, int(floor), int(seats), kit, accessible == "yes", slots))
    return rooms


def _request_of(prompt: str) -> RoomRequest | None:
    meeting = _MEETING.search(prompt)
    if meeting is None:
        return None
    people, h1, m1, h2, m2 = (int(x) for x in meeting.groups())
    start, end = h1 * 60 + m1, h2 * 60 + m2
    needs = re.search(r"The room needs (.*?)\.", prompt)
    equipment = tuple(e for e in EQUIPMENT if needs and e in needs.group(1))
    same = re.search(r"same floor as (\w+)", prompt)
    return RoomRequest(people, start, end - start, equipment, "must be wheelchair accessible" in prompt,
                       same.group(1) if same else None)


def solve_prompt(prompt: str) -> str | None:
    """The room that fits the problem rendered in ``prompt`` (None if it holds no problem)."""
    rooms, request = _rooms_of(prompt), _request_of(prompt)
    if not rooms or request is None:
        return None
    fitting = matching_rooms(rooms, request)
    return fitting[0] if len(fitting) == 1 else None


def _agent_reply(prompt: str) -> str:
    rooms = _rooms_of(prompt)
    if not rooms:
        return "I see no rooms to choose from."
    if "check every constraint" in prompt.lower():
        return f"I checked each room against every constraint.\nROOM: {solve_prompt(prompt) or rooms[0].name}"
    return f"They should book {rooms[0].name}."


# ----------------------------------------------------------------------------- critic and editor
_QUOTED = (re.compile(r"<current_template>\n?(.*?)\n?</current_template>", re.DOTALL),
           re.compile(r"```[a-zA-Z]*\n(.*?)```", re.DOTALL))


def _template_in(text: str) -> str | None:
    """The prompt template quoted in an editor request: the first ``<current_template>``
    element or fenced block holding ``{rooms}``."""
    for pattern in _QUOTED:
        for block in pattern.findall(text):
            if "{rooms}" in block:
                return block.strip("\n")
    return None


def _editor_reply(text: str) -> str:
    template = _template_in(text)
    if template is None:
        return "I cannot find the prompt template to edit."
    if INSTRUCTION not in template:
        template = f"{template}\n\n{INSTRUCTION}"
    return f"```\n{template}\n```"


def answer(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """``(role, reply)``: which part the request asks the endpoint to play, and its answer."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    if _EDITOR_MARK in text:
        return "editor", _editor_reply(text)
    if "{rooms}" in text:
        return "critic", CRITIQUE
    return "agent", _agent_reply(text)


# ----------------------------------------------------------------------------- the server
class ScriptedEndpoint(str):
    """The server's base URL (ending in ``/v1``); ``calls`` counts the requests per part,
    ``requests`` holds each one as ``(part, messages)``."""

    requests: list[tuple[str, list[dict[str, Any]]]]

    def __new__(cls, url: str, requests: list[tuple[str, list[dict[str, Any]]]]) -> Self:
        obj = super().__new__(cls, url)
        obj.requests = requests
        return obj

    @property
    def calls(self) -> Counter[str]:
        return Counter(part for part, _ in list(self.requests))


def create_app(requests: list[tuple[str, list[dict[str, Any]]]] | None = None) -> FastAPI:
    """The FastAPI app: ``POST /v1/chat/completions`` and ``GET /v1/models``; each chat
    request is appended to ``requests`` as ``(part, messages)``."""
    seen = requests if requests is not None else []
    app = FastAPI(title="room-selector scripted endpoint")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        body = await request.json()
        messages = body.get("messages") or []
        role, reply = answer(messages)
        seen.append((role, messages))
        return {
            "id": f"chatcmpl-scripted-{len(seen)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "agentbolt"}]}

    return app


@contextmanager
def serve_scripted_endpoint(port: int = 0, startup_timeout: float = 10.0) -> Iterator[ScriptedEndpoint]:
    """Serve the endpoint on 127.0.0.1 (a free port by default) in a thread; yields its base URL."""
    requests: list[tuple[str, list[dict[str, Any]]]] = []
    config = uvicorn.Config(create_app(requests), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="scripted-endpoint", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the scripted endpoint did not start on 127.0.0.1:{port} (port in use?)")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield ScriptedEndpoint(f"http://127.0.0.1:{bound}/v1", requests)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Serve the scripted room-selector endpoint until Ctrl-C.")
    p.add_argument("--port", type=int, default=8011)
    args = p.parse_args(argv)
    with serve_scripted_endpoint(args.port) as url:
        print(f"scripted endpoint on {url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print(f"requests served: {dict(url.calls)}")


if __name__ == "__main__":
    main()
