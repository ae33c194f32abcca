"""The agent of the chaos and multi-host tests: a few spans per rollout, and a side file
per process recording what it did, which the test checks against the store.

Each run writes two lines to ``$CHAOS_LOG_DIR/agent-<worker>-<pid>.jsonl``, written
through (one ``write`` each, so a kill -9 loses nothing that was written):

* ``["start", worker, rollout_id, attempt_id]`` when the agent begins an attempt;
* ``["done", worker, rollout_id, attempt_id, n]`` once it has emitted all ``n``
  annotation spans (steps ``0..n-1``) and is about to return its reward (1.0).

The runner then flushes those spans — plus the attempt's root span and reward span — to
the store, and only after the store has taken them all reports the attempt succeeded.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import IO

import agentbolt
from agentbolt.tracing import emit_annotation, require_context

STEPS = 3

_side: IO[str] | None = None


def _record(*fields: object) -> None:
    global _side
    if _side is None:
        worker = os.environ.get("CHAOS_WORKER", "runner")
        path = os.path.join(os.environ["CHAOS_LOG_DIR"], f"agent-{worker}-{os.getpid()}.jsonl")
        _side = open(path, "a", buffering=1)  # noqa: SIM115 — open for the process; line-buffered: each record is one write()
    _side.write(json.dumps(list(fields)) + "\n")


@agentbolt.rollout
async def chaos_agent(task: dict) -> float:
    ctx = require_context()
    worker = os.environ.get("CHAOS_WORKER", "runner")
    _record("start", worker, ctx.rollout_id, ctx.attempt_id)
    for step in range(STEPS):
        emit_annotation(chaos_step=step)
        await asyncio.sleep(float(task.get("sleep", 0.005)))
    _record("done", worker, ctx.rollout_id, ctx.attempt_id, STEPS)
    return 1.0
