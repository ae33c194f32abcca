"""A scripted teacher for the calc task: an OpenAI-compatible server that plays a perfect agent.

    python examples/calc/teacher.py --port 8100      # serve it alone (Ctrl-C stops)

It answers ``POST /v1/chat/completions`` the way the calc protocol (``task.py``) wants:

* to a training question (the last user message) — ``CALC(<expression>)``, the reference
  solution of that problem, looked up in the training problems it was given;
* after ``Result: N. ...`` — ``ANSWER: N``.

It knows only the training problems: a question it was not given (a held-out one) gets a
404, so nothing the teacher says can leak a held-out answer into the student's data.
``sft.py`` runs the calc agent against it through agentbolt's gateway, which records
every call as a span — the traces the student (SmolLM2) is then fine-tuned on.
"""

from __future__ import annotations

import argparse
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

__all__ = ["create_app", "serve_teacher", "teacher_reply"]

MODEL = "teacher"
_RESULT = re.compile(r"^Result:\s*(-?\d+(?:\.\d+)?)")


def teacher_reply(messages: list[dict[str, Any]], solutions: dict[str, str]) -> str | None:
    """What the perfect agent says next, or None for a question it does not know."""
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        return None
    last = str(users[-1].get("content") or "")
    result = _RESULT.match(last)
    if result is not None:
        return f"ANSWER: {result.group(1)}"
    expression = solutions.get(last.strip())
    return None if expression is None else f"CALC({expression})"


def create_app(problems: Iterable[dict[str, Any]]) -> FastAPI:
    """The teacher's app, knowing ``problems`` (``{"question", "expression", ...}``: training problems only)."""
    solutions = {str(p["question"]).strip(): str(p["expression"]) for p in problems}
    app = FastAPI(title="calc teacher")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        reply = teacher_reply(body.get("messages") or [], solutions)
        if reply is None:
            return JSONResponse({"error": {"message": "the teacher only knows the training problems",
                                           "type": "not_found", "code": "unknown_problem"}}, status_code=404)
        n = len(reply.split())
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n},
        })

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "agentbolt-example"}]}

    return app


@contextmanager
def serve_teacher(problems: Iterable[dict[str, Any]], *, port: int = 0) -> Iterator[str]:
    """Serve the teacher on 127.0.0.1 (a free port by default) in a thread; yields its base URL (``.../v1``)."""
    config = uvicorn.Config(create_app(problems), host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="calc-teacher", daemon=True)
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


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from task import train_set

    parser = argparse.ArgumentParser(description="serve the scripted calc teacher")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--train-size", type=int, default=400, help="training problems it knows")
    args = parser.parse_args()
    with serve_teacher(train_set(args.train_size), port=args.port) as url:
        print(f"calc teacher on {url} (model {MODEL!r}); Ctrl-C stops")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
