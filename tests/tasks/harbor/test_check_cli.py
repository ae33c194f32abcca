"""``agentbolt tasks check DIR`` against the real Docker Engine: the oracle must score 1,
the untouched environment 0; a task failing either, or not buildable, is reported and
the command exits 1; so does a machine without Docker."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from agentbolt.cli import app
from tasks.harbor.docker_engine import EXAMPLES, copy_task, host_base_image, needs_docker  # noqa: F401


@needs_docker
def test_our_example_tasks_pass_the_oracle_check(host_base_image: str) -> None:  # noqa: F811
    result = CliRunner().invoke(app, ["tasks", "check", str(EXAMPLES), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert {r["task"]: (r["oracle"], r["untouched"], r["ok"]) for r in rows} == {
        "agentbolt/count-lines": (1.0, 0.0, True), "agentbolt/fix-constant": (1.0, 0.0, True),
        "agentbolt/write-greeting": (1.0, 0.0, True)}


@needs_docker
def test_broken_tasks_are_reported_and_fail_the_check(tmp_path: Path, host_base_image: str) -> None:  # noqa: F811
    passes_anyway = copy_task("write-greeting", tmp_path / "a")
    (passes_anyway / "tests" / "test.sh").write_text("#!/bin/sh\nmkdir -p /logs/verifier\necho 1 > "
                                                     "/logs/verifier/reward.txt\n")
    wrong_oracle = copy_task("count-lines", tmp_path / "b")
    (wrong_oracle / "solution" / "solve.sh").write_text("#!/bin/sh\necho 4 > /app/answer.txt\n")
    no_base = copy_task("fix-constant", tmp_path / "c")
    (no_base / "environment" / "Dockerfile").write_text("FROM agentbolt-missing:never\n")
    root = tmp_path / "tasks"
    root.mkdir()
    for task in (passes_anyway, wrong_oracle, no_base):
        task.rename(root / task.parent.name)
    result = CliRunner().invoke(app, ["tasks", "check", str(root)])
    assert result.exit_code == 1, result.output
    assert "agentbolt/write-greeting: the untouched environment scored 1.0, not 0" in result.stderr
    assert "agentbolt/count-lines: the oracle (solution/solve.sh) scored 0.0, not 1" in result.stderr
    assert "agentbolt/fix-constant: HarborImageError" in result.stderr and "agentbolt-missing:never" in result.stderr
    assert "3 of 3 task(s) failed the check" in result.stderr
    assert result.stdout.count("NO") == 3


def test_without_docker_the_check_says_so_and_fails() -> None:
    result = CliRunner().invoke(app, ["tasks", "check", str(EXAMPLES)],
                                env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert result.exit_code == 1
    assert "cannot check Harbor tasks without Docker" in result.stderr
