"""``examples/harness_mini_swe_agent``: its generated tasks are real (each repo's test
fails as generated and passes after the issue's fix), held-out repos differ from the
training ones, and ``train.py --smoke`` runs mini-SWE-agent, unmodified and sandboxed,
through one GRPO step on SmolLM2 (it needs mini-SWE-agent installed: ``scripts/test``
installs it with the harness matrix's harnesses; ``AGENTBOLT_HARNESS_MATRIX=0`` skips it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "harness_mini_swe_agent"
sys.path.insert(0, str(EXAMPLE))

from repo_tasks import make_tasks  # noqa: E402


def _tests_pass(repo: Path) -> bool:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(repo)], cwd=repo,
                          capture_output=True, text=True, timeout=60, check=False)
    return done.returncode == 0


def _fix(repo: Path, problem: str) -> None:
    """What the issue text asks for, done by hand."""
    if m := re.search(r"(\w+) in settings.py must be (\d+)", problem):
        (repo / "settings.py").write_text(f"{m[1]} = {m[2]}\n")
    elif m := re.search(r"rename the function (\w+) in tool.py to (\w+)", problem):
        path = repo / "tool.py"
        path.write_text(path.read_text().replace(m[1], m[2]))
    elif m := re.search(r"create the file (\S+) containing the word (\w+)", problem):
        (repo / m[1]).write_text(m[2] + "\n")
    else:
        raise AssertionError(f"no fix known for {problem!r}")


def test_each_generated_task_fails_as_generated_and_passes_once_fixed(tmp_path: Path) -> None:
    tasks = make_tasks(tmp_path, 6, seed=0, prefix="train")
    assert len({t["problem"].split(":")[0] for t in tasks}) == 3  # the three kinds
    for task in tasks:
        repo = Path(task["repo"])
        assert not _tests_pass(repo), task
        _fix(repo, task["problem"])
        assert _tests_pass(repo), task


def test_held_out_tasks_are_not_training_tasks(tmp_path: Path) -> None:
    train = make_tasks(tmp_path, 30, seed=0, prefix="train")
    heldout = make_tasks(tmp_path, 30, seed=0, prefix="heldout")
    assert not {t["repo"] for t in train} & {t["repo"] for t in heldout}
    assert make_tasks(tmp_path / "again", 30, seed=0, prefix="train")[5]["problem"] == train[5]["problem"]


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.skipif(os.environ.get("AGENTBOLT_HARNESS_MATRIX") == "0",
                    reason="switched off with the harness matrix (AGENTBOLT_HARNESS_MATRIX=0)")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")
def test_smoke_run_trains_mini_swe_agent_in_its_sandbox(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from agentbolt.runner.harness.profiles import MiniSweAgent, installed_executable

    installed_executable(MiniSweAgent())  # not installed: fails with the command that installs it
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=1450)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "smoke check passed" in out.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["held_out_problems"] == 2
