"""A scripted critic/editor: real HTTP on 127.0.0.1, answers by rule, no model.

The tasks of the APO tests say which word the prompt must contain (``"needs": "quiet"``).

* **critic** (a request whose user message holds ``<trace``): finds the ``needs`` words
  of the traces shown, takes the first one the current template lacks and answers
  ``... Add the word 'quiet'.`` (``No change needed.`` when there is none);
* **editor** (a request holding ``<feedback>``): appends ``Mention quiet.`` to the
  template of the request and answers it in a fenced block. ``drop_placeholder``
  makes the first N editor replies lose a placeholder (``{rooms}`` → ``the rooms``),
  as a careless model would.

::

    with serve_scripted_llm() as llm:      # llm.base_url = "http://127.0.0.1:PORT/v1"
        ...
        llm.critic_requests                # bodies of the critic calls, in order
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

__all__ = ["ScriptedLLM", "scripted_reply", "serve_scripted_llm"]

_TEMPLATE = re.compile(r"<current_template>\n(.*?)\n</current_template>", re.DOTALL)
_NEEDS = re.compile(r'"needs":\s*"(\w+)"')
_ADD = re.compile(r"Add the word '(\w+)'")


@dataclass
class ScriptedLLM:
    """The rules' state and what was asked."""

    drop_placeholder: int = 0
    """Editor replies still to spoil by dropping ``{rooms}``."""
    fail_next: list[int] = field(default_factory=list)
    """HTTP statuses to answer the next requests with (then answer normally)."""
    critic_requests: list[dict[str, Any]] = field(default_factory=list)
    editor_requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, body: dict[str, Any]) -> str:
        with self.lock:
            return scripted_reply(body, self)


def scripted_reply(body: dict[str, Any], state: ScriptedLLM) -> str:
    """The answer to a chat body by the rules above (recording it in ``state``)."""
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") != "assistant")
    found = _TEMPLATE.search(text)
    template = found.group(1) if found else ""
    if "<feedback>" in text:
        state.editor_requests.append(body)
        word = _ADD.search(text)
        new = template + (f" Mention {word.group(1)}." if word else "")
        if state.drop_placeholder > 0:
            state.drop_placeholder -= 1
            new = new.replace("{rooms}", "the rooms")
        return f"Here is the revised template:\n```\n{new}\n```"
    state.critic_requests.append(body)
    missing = [w for w in _NEEDS.findall(text) if w not in template]
    if not missing:
        return "No change needed."
    return f"Trace 1: the prompt never mentions {missing[0]}, so the agent ignored it. Add the word '{missing[0]}'."


def _app(state: ScriptedLLM) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        with state.lock:
            status = state.fail_next.pop(0) if state.fail_next else None
        if status is not None:
            return JSONResponse({"error": {"message": f"scripted failure {status}"}}, status_code=status)
        content = state.reply(body)
        return JSONResponse({
            "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        })

    return app


@contextmanager
def serve_scripted_llm(state: ScriptedLLM | None = None) -> Iterator[ScriptedLLM]:
    """Serve the rules on a free port of 127.0.0.1 in a thread."""
    state = state or ScriptedLLM()
    config = uvicorn.Config(_app(state), host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                            access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="scripted-llm", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the scripted LLM server did not start")
        time.sleep(0.01)
    state.base_url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/v1"
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=10)
