"""A scripted teacher served as an OpenAI-compatible model: the plumbing the teachers share.

A teacher is a function from a chat request's body to the assistant's message (or None
for a task it does not know: a 404, so nothing of a held-out task can leak into the data
recorded from it). :func:`serve_teacher_app` serves one on 127.0.0.1 in a thread; the
agent is then run against it through agentbolt's gateway (``EngineSpec(kind="openai",
url=...)``), which records every call as a span that SFT learns from.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

__all__ = ["Teacher", "serve_teacher_app", "teacher_app"]

Teacher = Callable[[dict[str, Any]], "dict[str, Any] | None"]
"""A request body → the assistant's message (``content`` and/or ``tool_calls``), or None."""


def teacher_app(teacher: Teacher, model: str, unknown: str) -> FastAPI:
    """``/v1/chat/completions`` answered by ``teacher`` (404 with ``unknown`` as the message
    when it returns None) and ``/v1/models`` naming ``model``."""
    app = FastAPI(title=model)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        reply = teacher(await request.json())
        if reply is None:
            return JSONResponse({"error": {"message": unknown, "type": "not_found", "code": "unknown_task"}},
                                status_code=404)
        n = len(json.dumps(reply).split())
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
                         "message": reply}],
            "usage": {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n},
        })

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "agentbolt-example"}]}

    return app


@contextmanager
def serve_teacher_app(app: FastAPI, *, port: int = 0) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port by default) in a thread; yields its base URL (``.../v1``)."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                           access_log=False))
    thread = threading.Thread(target=server.run, name=app.title, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the teacher server did not start (is the port free?)")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
