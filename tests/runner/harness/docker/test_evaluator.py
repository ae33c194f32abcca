"""The evaluator of a containerised program: inside the program's environment after it
(Harbor's order: program, tests copied in, verifier) or here on the copied-back
workspace; the tests are never visible to the program."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agentbolt.runner.harness import Harness, Sandbox
from agentbolt.runner.harness.docker import DockerExecutor
from agentbolt.types import RolloutStatus
from runner.harness.docker.helpers import left_over
from runner.harness.helpers import PY, Served

# the program looks for the tests everywhere it can, then leaves its answer in the workspace
PROGRAM = r"""
found=$(find / -xdev -name 'secret_test*' 2>/dev/null | head -1)
[ -e /tests ] && found="$found /tests"
echo "${found:-none}" > looked.txt
echo 42 > answer.txt
apk_like_install=/usr/local/lib/tool; mkdir -p $apk_like_install 2>/dev/null && echo installed > $apk_like_install/x
echo done
"""

INSIDE = """
import os, pathlib, sys
ws = pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"])
tests = pathlib.Path(os.environ["AGENTBOLT_TESTS"])
expected = (tests / "secret_test_expected.txt").read_text().strip()
program_saw = (ws / "looked.txt").read_text().strip()
installed = pathlib.Path("/usr/local/lib/tool/x").exists()  # the program's own changes to the image are here
print("stdin:", sys.stdin.read().strip(), "exit:", os.environ["AGENTBOLT_EXIT_CODE"])
ok = (ws / "answer.txt").read_text().strip() == expected and program_saw == "none" and installed
print(1.0 if ok else 0.0)
"""


@pytest.fixture
def tests_dir(tmp_path: Path) -> Path:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "secret_test_expected.txt").write_text("42\n")
    return tests


@pytest.mark.parametrize("where", ["program", "host"])
async def test_the_tests_are_invisible_to_the_program_and_the_evaluator_sees_its_work(
    served: Served, base_image: str, tmp_path: Path, tests_dir: Path, where: str
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "prog.sh").write_text(PROGRAM)
    owner = f"test-{uuid.uuid4().hex[:8]}"
    if where == "program":
        (tests_dir / "grade.py").write_text(INSIDE)
        evaluator = ["python3", "/tests/grade.py"]
    else:  # here: the copied-back workspace and the tests directory on this machine
        grader = tmp_path / "grade_here.py"
        grader.write_text(INSIDE.replace('pathlib.Path("/usr/local/lib/tool/x").exists()', "True"))
        evaluator = [PY, str(grader)]
    harness = Harness(["sh", "prog.sh"], evaluator=evaluator, server_url=served.url, tests=tests_dir,
                      executor=DockerExecutor(base_image, owner=owner), evaluate_in=where,  # type: ignore[arg-type]
                      sandbox=Sandbox(workspace=workspace), timeout=60)
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED, rollout
    assert rollout.reward == 1.0
    assert left_over(owner) == []
    assert not (workspace / "answer.txt").exists()  # the task's workspace is copied, never written


async def test_a_task_chooses_where_its_evaluator_runs(
    served: Served, base_image: str, tmp_path: Path, tests_dir: Path
) -> None:
    (tests_dir / "grade.py").write_text("import os\nprint(1.0 if os.path.exists('/tests') else 0.0)\n")
    owner = f"test-{uuid.uuid4().hex[:8]}"
    harness = Harness(["true"], evaluator=["python3", "{grader}"], server_url=served.url, tests=tests_dir,
                      executor=DockerExecutor(base_image, owner=owner), timeout=60)
    # inside, the tests are at /tests; here they are not (they stay where they are on this machine)
    inside = {"evaluate_in": "program", "grader": "/tests/grade.py"}
    here = {"evaluate_in": "host", "grader": str(tests_dir / "grade.py")}
    rollouts = await served.run(harness, [inside, here])
    assert [r.reward for r in rollouts] == [1.0, 0.0]
    assert left_over(owner) == []
