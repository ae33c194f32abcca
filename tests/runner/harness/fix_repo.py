"""The tiny repo every real harness fixes, and one sandboxed run of a harness on it.

The repo's test fails (``add`` subtracts). A scripted model (:class:`PlaybookEngine`)
answers through the gateway; the evaluator (the repo's tests, run outside the sandbox)
scores the rollout. Shared by the harness matrix (short episodes, what each harness
needs) and the recorded long episodes (``test_harness_episodes.py``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.runner.harness import Harness, Sandbox
from agentbolt.runner.harness.profiles import (
    HarnessInstallError,
    HarnessNotInstalledError,
    HarnessProfile,
    install,
    installed_executable,
)
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Attempt, Rollout, RolloutConfig, Span
from runner.harness.helpers import ADMIN, PY, Served, script
from runner.harness.playbook_engine import PlaybookEngine

REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
TASK = "The test in test_calc.py fails: add() in calc.py subtracts. Fix calc.py so that the test passes."
GRADER = """
    import os, pathlib, subprocess, sys
    ws = os.environ["AGENTBOLT_WORKSPACE"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", ws], cwd=ws,
                          capture_output=True, text=True)
    seen = pathlib.Path(sys.argv[1])  # for the test's messages: what the program printed, what the tests said
    seen.write_text(sys.stdin.read()[-3000:] + "\\n--- tests ---\\n" + done.stdout[-2000:])
    print(1.0 if done.returncode == 0 else 0.0)
"""


def tool(name: str, **arguments: object) -> str:
    """A tool call as the model writes it (hermes format; the gateway parses it)."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@dataclass
class Case:
    """A harness and the model's script: ``steps`` by turn, ``side`` replies (or scripts)
    by a text their prompts hold, ``markers``: the texts that count a turn (see
    :class:`PlaybookEngine`)."""

    profile: HarnessProfile
    steps: list[str]
    side: dict[str, str | list[str]] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)
    """Tools the harness sends that the engine cannot run: the gateway leaves them out and records them."""
    markers: tuple[str, ...] = ()
    """Texts that count a turn besides the assistant turns (a harness that drops a reply from its history)."""


@dataclass
class Ran:
    """One finished rollout of a case: the rollout, its attempt, its spans, the engine (the prompts it saw)."""

    rollout: Rollout
    attempt: Attempt
    spans: list[Span]
    engine: PlaybookEngine
    repo: Path
    seen: Path
    wall_s: float


def executable(profile: HarnessProfile) -> Path:
    """The harness's executable, installed into the cache if it is not there (a failure says why)."""
    try:
        return installed_executable(profile)
    except HarnessNotInstalledError:
        pass
    try:
        return install(profile)
    except HarnessInstallError as exc:
        pytest.fail(f"{profile.name} {profile.install.version} cannot be installed on this machine: {exc}")


async def run_case(case: Case, tmp_path: Path, *, task_id: str) -> Ran:
    """Run the harness of ``case`` on a fresh copy of the repo, sandboxed, through the gateway."""
    program = executable(case.profile)
    repo = tmp_path / "repo"
    repo.mkdir()
    for relative, text in REPO.items():
        (repo / relative).write_text(text)
    grader = script(tmp_path, "grade.py", GRADER)
    engine = PlaybookEngine(byte_tokenizer(), case.steps, side=case.side, markers=case.markers)
    store = MemoryStore()
    started = time.monotonic()
    gateway = Gateway(engine, GatewayConfig(retry_backoff=0.01))
    seen = tmp_path / "seen.txt"
    with serve_in_thread(store, admin_token=ADMIN, gateway=gateway) as url:
        harness = Harness.for_(case.profile, task=TASK, executable=program, evaluator=[PY, grader, str(seen)],
                               server_url=url, timeout=180, sandbox=Sandbox(workspace=repo))
        [rollout] = await Served(store, url, gateway).run(harness, [{"id": task_id}],
                                                          config=RolloutConfig(max_attempts=1))
    wall = time.monotonic() - started
    (tmp_path / "prompts.txt").write_text("\n\n=====\n\n".join(engine.texts))  # to read when it fails
    assert rollout.latest_attempt_id is not None, rollout
    attempt = await store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    spans = await store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
    return Ran(rollout, attempt, list(spans), engine, repo, seen, wall)
