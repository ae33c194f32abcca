"""What the program sees of its task (issue 29, class 3): the fields the evaluator grades
with are not in ``$AGENTBOLT_TASK``, ``{task}`` or anywhere else the program can look."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agentbolt.runner.harness import Harness, HarnessConfigError
from agentbolt.runner.harness.harness import render_command, template_fields
from agentbolt.types import RolloutStatus
from runner.harness.attacks import run_attacks, stderr_tails
from runner.harness.helpers import Served

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

TASK = {"question": "6*7", "answer": "42", "solution": "PWNED-solution", "rubric": ["PWNED-rubric"]}

BODY = r'''
SEEN = [os.environ.get("AGENTBOLT_TASK", ""), *sys.argv[2:]]
def look(text, where="the environment"):
    for secret in ('"42"', "PWNED-solution", "PWNED-rubric"):
        if secret in text:
            pwned(f"found {secret} in {where}")
if attack == "honest":
    task = json.loads(os.environ["AGENTBOLT_TASK"])
    a, b = task["question"].split("*")
    open(os.path.join(ws, "result.txt"), "w").write(str(int(a) * int(b)))
elif attack == "environment":           # the task as the harness hands it over
    for text in SEEN:
        look(text)
elif attack == "every_variable":
    look(json.dumps(dict(os.environ)))
elif attack == "process_table":          # its own and init's command lines and environments
    for pid in os.listdir("/proc"):
        for name in ("cmdline", "environ"):
            try:
                look(open(f"/proc/{pid}/{name}", "rb").read().decode("latin-1"), f"/proc/{pid}/{name}")
            except OSError:
                pass
elif attack == "workspace_and_run_dir":  # what the harness left around it
    # not the interpreter the sandbox mounts read-only on purpose (sys.prefix: a venv under /tmp, as
    # in CI's fresh copy, holds library files with "42" in them): only what the harness left
    mounted = tuple(os.path.join(p, "") for p in {sys.prefix, sys.base_prefix})
    for top in (ws, "/run/agentbolt", "/tmp"):
        for root, _, files in os.walk(top):
            if os.path.join(root, "").startswith(mounted):
                continue
            for name in files:
                if os.path.join(root, name) == os.path.abspath(sys.argv[0]):
                    continue  # its own source holds the strings it looks for
                try:
                    look(open(os.path.join(root, name), "rb").read(1 << 16).decode("latin-1"), name)
                except OSError:
                    pass
'''

ATTACKS = ["environment", "every_variable", "process_table", "workspace_and_run_dir"]


@needs_bwrap
@pytest.mark.timeout(120)
async def test_the_program_does_not_see_what_the_evaluator_grades_with(served: Served, tmp_path: Path) -> None:
    # the evaluator grades with {answer} (a placeholder); the solution and the rubric an evaluator
    # would read from $AGENTBOLT_TASK, so the harness is told about them (task_hidden)
    by = await run_attacks(
        served, tmp_path, BODY, ATTACKS, task={k: v for k, v in TASK.items() if k != "attack"},
        extra=["{task}", "{question}"], evaluator_extra=["{answer}"], task_hidden=["solution", "rubric"],
    )
    assert by["honest"].status == RolloutStatus.SUCCEEDED and by["honest"].reward == 1.0, await stderr_tails(served, by)
    assert {a: (by[a].status, by[a].reward) for a in ATTACKS} == dict.fromkeys(ATTACKS, (
        RolloutStatus.SUCCEEDED, 0.0)), await stderr_tails(served, by)
    attempt = await served.store.get_attempt(by["honest"].rollout_id, by["honest"].latest_attempt_id)
    assert attempt.metadata["harness"]["harness.task_hidden"] == ["answer", "rubric", "solution"]


def _harness(**kwargs: Any) -> Harness:
    return Harness([sys.executable, "solve.py", "{question}"], evaluator=[sys.executable, "grade.py", "{answer}"],
                   **kwargs)


def test_by_default_the_fields_the_evaluator_names_are_hidden() -> None:
    shown, hidden = _harness().task_view({**TASK, "workspace": "/srv/tasks/1", "hidden": ["answers/*"]})
    assert shown == {"question": "6*7", "solution": "PWNED-solution", "rubric": ["PWNED-rubric"]}
    assert hidden == ["answer", "hidden", "workspace"]  # the sandbox's own fields too


def test_hidden_fields_can_be_named_and_visible_ones_listed() -> None:
    assert _harness(task_hidden=["solution", "rubric"]).task_view(TASK)[0] == {"question": "6*7"}
    shown, hidden = _harness(task_visible=["question", "answer"]).task_view(TASK)
    assert shown == {"question": "6*7", "answer": "42"} and hidden == ["rubric", "solution"]
    assert _harness().task_view("a plain string task") == ("a plain string task", [])


def test_a_program_command_that_names_a_hidden_field_says_so() -> None:
    with pytest.raises(HarnessConfigError, match=r"\{answer\}, a task field the program may not see"):
        render_command(["solve", "{answer}"], {"question": "q"}, hidden=["answer"])
    assert template_fields(["grade", "{answer}", "--case={cases[0]}", "{{literal}}", "{task}"]) == {"answer", "cases"}