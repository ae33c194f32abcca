"""The adversarial suite's common shape: one program, one attack per rollout, an honest
control beside them, and an evaluator that pays for what the attack was after.

The program gets the attack's name as ``$1``; it writes ``result.txt`` in its workspace:
``42`` (the right answer, what the honest control writes) or ``PWNED <what>`` when an
attack got through. The evaluator pays 1.0 for either, so an attack that works earns
the reward it did not deserve, and one that is stopped earns 0.0 like a wrong answer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentbolt import semconv
from agentbolt.runner.harness import Harness, Sandbox
from agentbolt.types import Rollout, RolloutConfig
from runner.harness.helpers import Served, script

GRADER = """
import os, pathlib
got = pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"], "result.txt")
text = got.read_text().strip() if got.is_file() else ""
print(1.0 if text == "42" or text.startswith("PWNED") else 0.0)
"""

PRELUDE = '''
import ctypes, errno, json, os, signal, socket, sys, time
attack = sys.argv[1]
ws = os.environ.get("AGENTBOLT_WORKSPACE", ".")
def pwned(what):
    sys.stderr.write("PWNED " + str(what) + "\\n")   # in the attempt's stderr tail, for whoever debugs
    open(os.path.join(ws, "result.txt"), "w").write("PWNED " + str(what) + "\\n")
    sys.exit(0)
def answer():
    open(os.path.join(ws, "result.txt"), "w").write("42\\n")
'''


async def run_attacks(
    served: Served,
    tmp_path: Path,
    body: str,
    attacks: Sequence[str],
    *,
    sandbox: Sandbox | None = None,
    extra: Sequence[str] = (),
    evaluator_extra: Sequence[str] = (),
    task: dict[str, Any] | None = None,
    concurrency: int = 3,
    **harness: Any,
) -> dict[str, Rollout]:
    """Run ``body`` (Python after :data:`PRELUDE`) once per attack and once as
    ``honest``; the rollouts by attack. ``extra``: more arguments of the program (a
    template), ``evaluator_extra`` of the evaluator; ``task``: more fields of each task."""
    program = script(tmp_path, "attacker.py", PRELUDE + body)
    grader = script(tmp_path, "grade.py", GRADER)
    agent = Harness([sys.executable, program, "{attack}", *extra], evaluator=[sys.executable, grader, *evaluator_extra],
                    sandbox=sandbox or Sandbox(), server_url=served.url, **{"timeout": 30, **harness})
    tasks = [{"attack": a, **(task or {})} for a in ["honest", *attacks]]
    rollouts = await served.run(agent, tasks, config=RolloutConfig(max_attempts=1), concurrency=concurrency)
    return {t["attack"]: r for t, r in zip(tasks, rollouts, strict=True)}


async def event_kinds(served: Served, rollout: Rollout) -> set[str]:
    spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
    return set(semconv.sandbox_event_counts(spans))


async def stderr_tails(served: Served, by: dict[str, Rollout]) -> dict[str, str]:
    """Each attack's stderr tail (where the program says what got through)."""
    tails = {}
    for attack, rollout in by.items():
        attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
        tails[attack] = str(attempt.metadata.get("harness", {}).get("harness.stderr_tail", ""))[-300:]
    return tails


async def failure(served: Served, rollout: Rollout) -> str:
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    return str(attempt.error)
