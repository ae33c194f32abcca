"""A scripted OpenAI-compatible server for the ports of Agent Lightning's examples.

The v0.3 examples build ``OpenAI()`` / ``AsyncOpenAI()`` clients with no arguments, so
the tests point ``OPENAI_BASE_URL`` at this server. A *script* — a function of the
request body — decides each answer: a string (the assistant's text) or a dict (an
assistant message, e.g. with ``tool_calls``). Every request body is kept in ``calls``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

Script = Callable[[dict[str, Any]], "str | dict[str, Any]"]


@dataclass
class ScriptedOpenAI:
    url: str
    calls: list[dict[str, Any]] = field(default_factory=list)


def last_user(body: dict[str, Any]) -> str:
    """The text of the request's last user message."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else str(content)
    return ""


def text_of(body: dict[str, Any]) -> str:
    """Every message's text, joined (to match on what the model was shown)."""
    return "\n".join(str(m.get("content") or "") for m in body.get("messages", []))


def _reply(body: dict[str, Any], answer: str | dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": answer} if isinstance(answer, str) else {"role": "assistant", **answer}
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@contextmanager
def serve_script(script: Script) -> Iterator[ScriptedOpenAI]:
    """Serve ``script`` on a free port of 127.0.0.1; yields the server (``url`` ends in ``/v1``)."""
    app = FastAPI()
    server_state = ScriptedOpenAI(url="")
    lock = threading.Lock()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        with lock:
            server_state.calls.append(body)
        return JSONResponse(_reply(body, script(body)))

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="scripted-openai", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the scripted OpenAI server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    server_state.url = f"http://127.0.0.1:{port}/v1"
    try:
        yield server_state
    finally:
        server.should_exit = True
        thread.join(timeout=10)
