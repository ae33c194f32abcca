"""A scripted teacher that plays a perfect mini-SWE-agent model, on training tasks only.

    python examples/harness_mini_swe_agent/teacher.py --port 8102   # serve it alone (Ctrl-C stops)

An OpenAI-compatible server (``POST /v1/chat/completions``). mini-SWE-agent's first user
message carries the issue (``Please solve this issue: <problem>``); the teacher reads it
and answers with one call of mini-SWE-agent's ``bash`` tool: the fix, one shape per kind
of task with every part copied from the issue's text, then the submit command —

* a constant — ``echo LIMIT = 42 > settings.py && echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``;
* a rename — ``sed -i s/compute_limits/compute_limit/ tool.py && echo COMPLETE_...``;
* a file — ``echo hello > limit.txt && echo COMPLETE_...``.

One model call per episode, no text besides the call. No quotes in the commands: the
command is a JSON string in the call, and a student that copies a quote writes it
unescaped (a first run's SFT model did: ``"echo "WIDTH = 84" > ..."``, not a call). mini-SWE-agent's prompt asks for the
submit command on its own; its code ends the episode when the first line a command prints
is ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (the fixes print nothing), so the joined
command submits in the same call. On this CPU that halves what the model has to process per
episode (mini-SWE-agent's prompt is ~1,100 tokens; a second call would repeat it). After a
tool result (an episode that did not end) the teacher answers the submit command alone.

It knows only the training tasks it was given: any other issue (a held-out one) gets a
404, so nothing of a held-out task reaches the student's data. ``stages.py`` runs
mini-SWE-agent against it through agentbolt's gateway, which records every call; SFT
then fine-tunes SmolLM2 on those calls, rendered as the gateway serves SmolLM2.
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

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from _common.teacher_server import serve_teacher_app, teacher_app  # noqa: E402

__all__ = ["MODEL", "SUBMIT", "command_for", "serve_teacher", "teacher_reply"]

MODEL = "mini-swe-teacher"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_ISSUE = re.compile(r"Please solve this issue:\s*(.+?)\s*$", re.MULTILINE)
_KINDS = (
    (re.compile(r"(\w+) in settings\.py must be (\d+)"), lambda m: f"echo {m[1]} = {m[2]} > settings.py"),
    (re.compile(r"rename the function (\w+) in tool\.py to (\w+)"), lambda m: f"sed -i s/{m[1]}/{m[2]}/ tool.py"),
    (re.compile(r"create the file (\S+) containing the word (\w+)"), lambda m: f"echo {m[2]} > {m[1]}"),
)


def command_for(problem: str) -> str:
    """The one bash command that fixes the issue ``problem``, made of its words."""
    for pattern, command in _KINDS:
        if found := pattern.search(problem):
            return command(found)
    raise ValueError(f"no command known for the issue {problem!r}")


def _bash(command: str) -> dict[str, Any]:
    call = {"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def teacher_reply(messages: list[dict[str, Any]], known: set[str]) -> dict[str, Any] | None:
    """The perfect model's next message: the fix and the submit command in one call (the
    submit command alone after a tool result); None for an issue not among ``known``
    (the training problems)."""
    users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
    found = _ISSUE.search(users[0]) if users else None
    if found is None or found.group(1) not in known:
        return None
    answered = any(m.get("role") == "assistant" for m in messages)
    return _bash(SUBMIT if answered else f"{command_for(found.group(1))} && {SUBMIT}")


def create_app(tasks: Iterable[dict[str, Any]]) -> FastAPI:
    """The teacher's app, knowing ``tasks`` (training tasks only: ``{"problem", ...}``)."""
    known = {str(t["problem"]).strip() for t in tasks}
    return teacher_app(lambda body: teacher_reply(body.get("messages") or [], known), MODEL,
                       "the teacher only knows the training tasks")


@contextmanager
def serve_teacher(tasks: Iterable[dict[str, Any]], *, port: int = 0) -> Iterator[str]:
    """Serve the teacher on 127.0.0.1 (a free port by default) in a thread; yields its base URL (``.../v1``)."""
    with serve_teacher_app(create_app(tasks), port=port) as url:
        yield url


if __name__ == "__main__":
    from repo_tasks import make_tasks

    parser = argparse.ArgumentParser(description="serve the scripted mini-SWE-agent teacher")
    parser.add_argument("--port", type=int, default=8102)
    parser.add_argument("--train-size", type=int, default=48)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks-dir", default="runs/mini_swe_teacher_tasks")
    args = parser.parse_args()
    with serve_teacher(make_tasks(Path(args.tasks_dir), args.train_size, args.seed, "train"), port=args.port) as url:
        print(f"mini-SWE-agent teacher on {url} (model {MODEL!r}); Ctrl-C stops")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
