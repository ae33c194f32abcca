"""A scripted SQL teacher: an OpenAI-compatible server that plays a perfect agent.

    python examples/sql_agent/teacher.py --port 8101      # serve it alone (Ctrl-C stops)

On ``POST /v1/chat/completions`` (text protocol, ``protocol.py``):

* to the opening message of a training question — the gold SQL of that question, looked
  up among the training tasks it was given (the question is the ``Question:`` line);
* after ``Result: ...`` — ``DONE``; after ``Error: ...`` — the gold SQL again.

When the request offers the ``run_sql`` tool (the ``tools`` protocol) it calls the tool
with the gold SQL instead, and answers ``DONE`` after the tool's result.

It knows only the training questions: any other question (a held-out one) gets a 404,
so nothing it says can leak a held-out answer into the student's data. ``train.py``
runs the SQL agent against it through agentbolt's gateway, which records every call as
a span; SFT then fine-tunes SmolLM2 on those traces.
"""

from __future__ import annotations

import argparse
import json
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

__all__ = ["MODEL", "create_app", "serve_teacher", "teacher_reply"]

MODEL = "sql-teacher"
_QUESTION = re.compile(r"^Question:\s*(.+?)\s*$", re.MULTILINE)


def teacher_reply(messages: list[dict[str, Any]], gold_by_question: dict[str, str],
                  tools: bool = False) -> dict[str, Any] | None:
    """The perfect agent's next message (``content`` or a ``run_sql`` tool call), or None
    for a question it does not know."""
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    if not users:
        return None
    found = _QUESTION.search(users[0])
    gold = gold_by_question.get(found.group(1)) if found else None
    if gold is None:
        return None
    last = messages[-1]
    if last.get("role") == "tool" or (last.get("role") == "user" and len(users) > 1
                                       and str(last.get("content") or "").startswith("Result:")):
        return {"role": "assistant", "content": "DONE"}
    if tools:
        call = {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                "function": {"name": "run_sql", "arguments": json.dumps({"query": gold})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": gold}


def _offers_run_sql(body: dict[str, Any]) -> bool:
    return any((t.get("function") or {}).get("name") == "run_sql" for t in body.get("tools") or [])


def create_app(tasks: Iterable[dict[str, Any]]) -> FastAPI:
    """The teacher's app, knowing ``tasks`` (training tasks only: ``{"question", "gold", ...}``)."""
    gold_by_question = {str(t["question"]).strip(): str(t["gold"]) for t in tasks}
    app = FastAPI(title="sql teacher")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        reply = teacher_reply(body.get("messages") or [], gold_by_question, tools=_offers_run_sql(body))
        if reply is None:
            return JSONResponse({"error": {"message": "the teacher only knows the training questions",
                                           "type": "not_found", "code": "unknown_question"}}, status_code=404)
        n = len(json.dumps(reply).split())
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
                         "message": reply}],
            "usage": {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n},
        })

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "agentbolt-example"}]}

    return app


@contextmanager
def serve_teacher(tasks: Iterable[dict[str, Any]], *, port: int = 0) -> Iterator[str]:
    """Serve the teacher on 127.0.0.1 (a free port by default) in a thread; yields its base URL (``.../v1``)."""
    server = uvicorn.Server(uvicorn.Config(create_app(tasks), host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, name="sql-teacher", daemon=True)
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
    from data import DEFAULT_DATA_DIR, load_split

    parser = argparse.ArgumentParser(description="serve the scripted SQL teacher")
    parser.add_argument("--port", type=int, default=8101)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    args = parser.parse_args()
    with serve_teacher(load_split("train", data_dir=Path(args.data_dir)), port=args.port) as url:
        print(f"SQL teacher on {url} (model {MODEL!r}); Ctrl-C stops")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
