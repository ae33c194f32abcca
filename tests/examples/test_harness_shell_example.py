"""``examples/harness_shell/train.py --smoke``: a POSIX shell agent (curl + awk), unmodified,
trained with GRPO through the harness controller — runners in their own processes, each
program in its own sandbox, SmolLM2-135M in the server process receiving the weights."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "harness_shell"


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(shutil.which("bwrap") is None or shutil.which("curl") is None,
                    reason="needs bubblewrap and curl (apt-get install bubblewrap curl)")
def test_smoke_run_trains_the_shell_agent_in_its_sandbox(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=1150)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "smoke check passed" in out.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["history"][0]["sandbox/events"] == 0
    assert summary["held_out_problems"] == 2 and summary["sandbox_events"] == 0 and summary["threads"] == 1
    assert (run / "learning_curve.png").stat().st_size > 0


def _docker_reason() -> str | None:
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:  # noqa: BLE001 - no SDK or no engine: the test cannot run here
        return f"needs the docker SDK and a Docker Engine ({type(exc).__name__}: {exc})"[:200]
    return None


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("busybox") is None,
                    reason="the base image is made of this machine's busybox and curl (apt-get install busybox-static curl)")
def test_smoke_run_trains_the_shell_agent_in_docker_containers(tmp_path: Path) -> None:
    reason = _docker_reason()
    if reason:
        pytest.skip(reason)
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--smoke", "--executor", "docker",
                          "--run-dir", str(run)], check=False, capture_output=True, text=True, timeout=1150)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "smoke check passed" in out.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["sandbox_events"] == 0


def test_the_agent_and_its_grader_work_without_agentbolt() -> None:
    """agent.sh | grade.py is plain Unix; the agent is a shell script, not Python."""
    grade = [sys.executable, str(EXAMPLE / "grade.py"), "--expected", "928"]
    def run(output: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(grade, input=output, check=False, capture_output=True, text=True, timeout=30)

    right, wrong = run("call: ok\nanswer: 928\n"), run("call: none\nanswer: 927\n")
    assert float(right.stdout) == pytest.approx(1.1) and float(wrong.stdout) == 0.0
    agent = (EXAMPLE / "agent.sh").read_text()
    assert agent.startswith("#!/bin/sh") and "agentbolt" not in agent.lower()


def test_the_agent_calls_its_tool_between_two_model_calls() -> None:
    """Against a fake model that echoes the last user message: the first reply holds a
    CALC(...) call, the shell's calculator computes it, the second call carries the result."""
    import os

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fakes.openai_server import serve_fake_openai

    with serve_fake_openai() as url:
        env = {**os.environ, "OPENAI_BASE_URL": str(url), "OPENAI_API_KEY": "none"}
        out = subprocess.run(["sh", str(EXAMPLE / "agent.sh"), "use CALC(41 * 23 - 15)"], env=env,
                             check=False, capture_output=True, text=True, timeout=60)
        bodies = url.bodies("/v1/chat/completions")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["call: ok", "answer: 928"]
    assert len(bodies) == 2 and bodies[1]["messages"][-1]["content"].startswith("Result: 928.")
