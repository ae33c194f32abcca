"""``examples/harbor_tasks/train.py --smoke``: a one-command shell agent trained with GRPO on
our Harbor tasks, each rollout in its task's Docker environment with tests/test.sh as the
verifier after it — runners in their own processes, SmolLM2-135M in the server process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from runner.harness.docker.conftest import REASON

pytest.importorskip("torch")
pytest.importorskip("peft")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "harbor_tasks"


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("busybox") is None,
                    reason="the base image is made of this machine's busybox and curl "
                           "(apt-get install busybox-static curl)")
def test_smoke_run_trains_the_shell_agent_on_harbor_tasks_in_docker(tmp_path: Path) -> None:
    if REASON is not None:  # the Docker tests' own check: no engine answers
        pytest.skip(REASON)
    run = tmp_path / "run"
    root = str(EXAMPLE.parents[1])  # this checkout's agentbolt, whichever one is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=1150, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "smoke check passed" in out.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["held_out_problems"] == 2
    assert summary["tasks"] == ["agentbolt/count-lines", "agentbolt/fix-constant", "agentbolt/write-greeting"]
    assert summary["history"][0]["rollouts/failed"] in (0, None)


def test_the_agent_runs_the_command_the_model_gives_without_agentbolt(tmp_path: Path) -> None:
    """agent.sh is plain POSIX shell: against a fake model that answers "echo: <the last user
    message>", it runs that answer as its one command, from the working directory it is
    given (a program named ``echo:`` on PATH runs the rest)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fakes.openai_server import serve_fake_openai

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "echo:").write_text('#!/bin/sh\nexec "$@"\n')
    (bin_dir / "echo:").chmod(0o755)
    with serve_fake_openai() as url:
        env = {**os.environ, "OPENAI_BASE_URL": str(url), "OPENAI_API_KEY": "none",
               "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        out = subprocess.run(["sh", str(EXAMPLE / "agent" / "agent.sh"), "echo made > made.txt", str(tmp_path)],
                             env=env, check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["command: echo: echo made > made.txt", "exit: 0"]
    assert (tmp_path / "made.txt").read_text() == "made\n"
    assert "agentbolt" not in (EXAMPLE / "agent" / "agent.sh").read_text().lower()
