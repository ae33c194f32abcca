"""``examples/harness_mini_swe_agent``: its generated tasks are real (each repo's test
fails as generated and passes after the issue's fix), held-out repos differ from the
training ones, the scripted teacher's bash command fixes and submits a training task and
the teacher refuses held-out ones, and ``train.py --smoke`` runs the whole ladder
(untrained, SFT on the teacher's episodes, GRPO) with mini-SWE-agent, unmodified and
sandboxed, on SmolLM2 (it needs mini-SWE-agent installed: ``scripts/test`` installs it with
the harness matrix's harnesses; ``AGENTBOLT_HARNESS_MATRIX=0`` skips it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.example_modules import load_example

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "harness_mini_swe_agent"
msa = load_example(EXAMPLE, ("repo_tasks", "teacher", "stages", "train"))
make_tasks, SUBMIT, teacher_reply, serve_teacher = (msa.repo_tasks.make_tasks, msa.teacher.SUBMIT,
                                                    msa.teacher.teacher_reply, msa.teacher.serve_teacher)


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


def _opening(problem: str) -> list[dict[str, str]]:
    """mini-SWE-agent's first request, as far as the teacher reads it."""
    return [{"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
            {"role": "user", "content": f"Please solve this issue: {problem}\n\nYou can execute bash commands..."}]


def _command(reply: dict[str, object]) -> str:
    [call] = reply["tool_calls"]  # type: ignore[misc]
    assert call["function"]["name"] == "bash"
    return str(json.loads(call["function"]["arguments"])["command"])


def test_the_teachers_one_call_fixes_the_repo_and_submits(tmp_path: Path) -> None:
    tasks = make_tasks(tmp_path, 6, seed=0, prefix="train")
    known = {t["problem"] for t in tasks}
    for task in tasks:
        reply = teacher_reply(_opening(task["problem"]), known)
        assert reply is not None and reply["content"] is None
        command = _command(reply)
        assert command.endswith(f" && {SUBMIT}")
        repo = Path(task["repo"])
        done = subprocess.run(["bash", "-c", command], cwd=repo, capture_output=True, text=True, check=True)
        assert done.stdout.splitlines()[0] == "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini's submit check
        assert _tests_pass(repo), (task, command)
    # after a tool result: the submit command alone
    more = [*_opening(tasks[0]["problem"]), {"role": "assistant", "content": "ls"}, {"role": "tool", "content": "x"}]
    assert _command(teacher_reply(more, known) or {}) == SUBMIT


def test_the_teacher_refuses_held_out_tasks(tmp_path: Path) -> None:
    import httpx

    train = make_tasks(tmp_path, 6, seed=0, prefix="train")
    heldout = make_tasks(tmp_path, 6, seed=0, prefix="heldout")
    with serve_teacher(train) as url:
        body = {"model": "m", "messages": _opening(heldout[0]["problem"])}
        refused = httpx.post(f"{url}/chat/completions", json=body, timeout=10)
        answered = httpx.post(f"{url}/chat/completions", json={**body, "messages": _opening(train[0]["problem"])},
                              timeout=10)
    assert refused.status_code == 404
    assert answered.status_code == 200
    assert answered.json()["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("config", ["cpu.yaml", "gpu.yaml"])
def test_each_config_gives_every_setting_and_a_valid_engine(config: str) -> None:
    from agentbolt.engines import EngineSpec

    settings = msa.train.parse_args(["--config", str(EXAMPLE / config)])
    assert set(msa.train.SMOKE) | {"engine", "served_model", "agent_steps", "command_timeout", "sft_lr",
                                   "sft_batch_size", "lora_r", "micro_batch_tokens", "grpo_minutes",
                                   "grpo_lr"} <= set(settings)
    assert settings["stages"] == ["untrained", "sft", "grpo"]
    EngineSpec(**settings["engine"])  # gpu.yaml is untested on a GPU; its engine spec at least validates


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.skipif(os.environ.get("AGENTBOLT_HARNESS_MATRIX") == "0",
                    reason="switched off with the harness matrix (AGENTBOLT_HARNESS_MATRIX=0)")
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")
def test_smoke_run_climbs_the_ladder_with_mini_swe_agent_in_its_sandbox(tmp_path: Path) -> None:
    pytest.importorskip("peft")
    from agentbolt.runner.harness.profiles import MiniSweAgent, installed_executable

    installed_executable(MiniSweAgent())  # not installed: fails with the command that installs it
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=1450)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "smoke check passed" in out.stdout
    untrained, sft, grpo = json.loads((run / "ladder.json").read_text())
    assert [st["name"] for st in (untrained, sft, grpo)] == ["untrained", "SFT", "SFT+GRPO"]
    assert all(st["scored"] == 2 and st["details"]["failed"] == 0 for st in (untrained, sft, grpo))
    # the teacher's episodes: mini-SWE-agent fixed each training repo from its calls; SFT learned each call
    assert sft["details"]["teacher_success"] == 1.0 and sft["details"]["records"] == [3]
    [step] = grpo["details"]["steps"]
    assert step["calls/per_rollout"] >= 1 and step["rollouts/failed"] == 0 and step["sandbox/events"] == 0
    assert "| SFT+GRPO |" in (run / "ladder.md").read_text()
