"""The README's main-job command is what CI runs in a fresh venv (``.ci/readme_main_job.py``):
it is read from the README, and a run whose held-out evaluation scored nothing fails."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("readme_main_job", ROOT / ".ci" / "readme_main_job.py")
assert spec is not None and spec.loader is not None
job = importlib.util.module_from_spec(spec)
spec.loader.exec_module(job)


def test_the_command_comes_from_the_readme_and_runs_the_main_job_in_smoke_mode() -> None:
    command = job.smoke_command(job.main_job_command((ROOT / "README.md").read_text()))
    assert command.startswith("python3 -m venv .venv && ")
    assert command.endswith(".venv/bin/python examples/calc/train.py --smoke")
    install = command.split("&&")[2]
    assert "dev" not in install  # the main job's own extras, never the test extra


def test_the_main_jobs_install_line_holds_what_the_calc_example_imports() -> None:
    """``openai`` (the calc agent's client) must come with the core install."""
    import tomllib

    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.split(">")[0].split("=")[0].strip() == "openai" for d in core)


def test_an_unscored_evaluation_fails_the_check() -> None:
    broken = ("held-out success (greedy, 2 problems): n/a before -> n/a after  (+0.0 points)\n"
              "held-out rollouts scored: before 0/2, after 0/2\n")
    problems = job.check_output(broken)
    assert any("scored no rollout" in p for p in problems) and any("n/a" in p for p in problems)
    assert job.check_output("the job crashed\n")  # no summary at all
    good = ("held-out success (greedy, 2 problems): 50.0 % before -> 50.0 % after  (+0.0 points)\n"
            "held-out rollouts scored: before 2/2, after 2/2\n")
    assert job.check_output(good) == []


def test_a_readme_without_the_section_is_refused() -> None:
    with pytest.raises(SystemExit, match="no '1. Install and run the main job' section"):
        job.main_job_command("# agentbolt\n")
