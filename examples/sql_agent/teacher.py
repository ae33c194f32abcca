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
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/_common
from _common.teacher_server import serve_teacher_app, teacher_app  # noqa: E402

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
    return teacher_app(lambda body: teacher_reply(body.get("messages") or [], gold_by_question,
                                                  tools=_offers_run_sql(body)),
                       MODEL, "the teacher only knows the training questions")


@contextmanager
def serve_teacher(tasks: Iterable[dict[str, Any]], *, port: int = 0) -> Iterator[str]:
    """Serve the teacher on 127.0.0.1 (a free port by default) in a thread; yields its base URL (``.../v1``)."""
    with serve_teacher_app(create_app(tasks), port=port) as url:
        yield url


if __name__ == "__main__":
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
