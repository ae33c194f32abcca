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
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # examples/_common
from _common.teacher_server import serve_teacher_app, teacher_app  # noqa: E402

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

    def answer(body: dict[str, Any]) -> dict[str, Any] | None:
        reply = teacher_reply(body.get("messages") or [], solutions)
        return None if reply is None else {"role": "assistant", "content": reply}

    return teacher_app(answer, MODEL, "the teacher only knows the training problems")


@contextmanager
def serve_teacher(problems: Iterable[dict[str, Any]], *, port: int = 0) -> Iterator[str]:
    """Serve the teacher on 127.0.0.1 (a free port by default) in a thread; yields its base URL (``.../v1``)."""
    with serve_teacher_app(create_app(problems), port=port) as url:
        yield url


if __name__ == "__main__":
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
