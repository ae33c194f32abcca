"""Arguments in the sandbox: a task text of any length the OS allows is an argument, not a
path; a program's own files named in its command are still found and mounted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentbolt.runner.harness import Harness
from agentbolt.runner.harness.sandbox.session import _absolute_argv
from agentbolt.types import RolloutStatus
from runner.harness.helpers import PY, Served, script

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is not installed (apt-get install bubblewrap)")

LONG_WORD = "x" * 10_000
"""More than NAME_MAX (255) bytes without a '/': looking it up as a path is ENAMETOOLONG."""
LONG_TEXT = ("Fix the failing test in tests/test_calc.py: calc/core.py returns the wrong sum. " * 130)[:10_000]
"""A real issue text: paths inside, runs of words, 10,000 characters."""


def test_a_long_text_is_an_argument_and_a_named_file_is_still_a_file(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("")
    argv, files = _absolute_argv([PY, "prog.py", LONG_WORD, LONG_TEXT, "a\0b", "/" + "y" * 300], str(tmp_path))
    assert argv[1] == str(prog) and argv[2:] == [LONG_WORD, LONG_TEXT, "a\0b", "/" + "y" * 300]
    assert prog in files and all(len(str(f)) < 4096 for f in files)


@needs_bwrap
@pytest.mark.parametrize("text", [LONG_WORD, LONG_TEXT], ids=["one-word", "issue-text"])
async def test_a_sandboxed_rollout_takes_a_10000_character_task_text(served: Served, tmp_path: Path, text: str) -> None:
    prog = script(tmp_path, "prog.py", """
        import os, sys
        open("task.txt", "w").write(sys.argv[1])
    """)
    grader = script(tmp_path, "grade.py", f"""
        import os, pathlib
        got = pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"], "task.txt").read_text()
        print(1.0 if got == {text!r} else 0.0)
    """)
    harness = Harness([PY, prog, "{text}"], evaluator=[PY, grader], server_url=served.url)  # sandboxed by default
    [rollout] = await served.run(harness, [{"text": text}])
    assert len(text) == 10_000
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 1.0
