"""The harness examples run as documented: ``train.py --smoke`` evaluates and trains an
unmodified program (plain openai script; LangChain agent) through the controller, the
gateway records its calls with token ids, and the evaluator scores it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(("example", "calls"), [("harness_openai", 1), ("harness_langchain", 2)])
def test_smoke_run_trains_through_the_controller(example: str, calls: int, tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / example / "train.py"), "--smoke", "--out", str(tmp_path)],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "smoke check passed" in out.stdout
    assert "validation: 2 rollouts, mean reward 1.00" in out.stdout
    triplets = [json.loads(line) for line in (tmp_path / "triplets.jsonl").read_text().splitlines()]
    assert len(triplets) == 2 * calls
    assert all(t["has_token_ids"] and t["prompt"]["token_ids"] and t["reward"] == 1.0 for t in triplets)


def test_the_program_and_evaluator_work_without_agentbolt() -> None:
    """solve.py | grade.py is plain Unix: the grader reads the agent's answer on stdin."""
    grade = EXAMPLES / "harness_openai" / "grade.py"
    right = subprocess.run([sys.executable, str(grade), "--expected", "5"], input="The answer is 5.\n",
                           check=False, capture_output=True, text=True, timeout=30)
    wrong = subprocess.run([sys.executable, str(grade), "--expected", "5"], input="The answer is 6.\n",
                           check=False, capture_output=True, text=True, timeout=30)
    assert right.stdout.strip() == "1.0" and wrong.stdout.strip() == "0.0"
    for program in (EXAMPLES / "harness_openai" / "solve.py", EXAMPLES / "harness_langchain" / "agent.py"):
        imports = [line for line in program.read_text().splitlines() if line.startswith(("import ", "from "))]
        assert imports and not [line for line in imports if "agentbolt" in line], program
