"""What a Harbor task's settings become for the harness and the executor, and how the
verifier's report turns into a reward — no Docker needed."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from agentbolt.runner.harness.docker import DockerExecutor
from agentbolt.tasks.harbor import (
    HarborHarness,
    HarborRewardError,
    HarborTaskError,
    docker_input,
    harbor_harness,
    load,
    task_limits,
)
from agentbolt.tasks.harbor.run import HIDDEN_FIELDS
from agentbolt.tasks.harbor.verifier import reward_of
from tasks.harbor.docker_engine import EXAMPLES, copy_task


def _report(**fields: object) -> str:
    return orjson.dumps({"harbor_verifier": {"exit_code": 0, "timed_out": False, "reward.json": None,
                                             "reward.txt": None, "log_tail": "", **fields}}).decode()


def test_the_verifiers_report_becomes_named_rewards_or_a_clear_failure() -> None:
    assert reward_of(_report(**{"reward.txt": "1\n"})).rewards == {"reward": 1.0}
    both = reward_of(_report(**{"reward.json": '{"reward": 1, "unchanged": 0}', "reward.txt": "0"}))
    assert both.rewards == {"reward": 1.0, "unchanged": 0.0} and both.primary == "reward"  # reward.json wins
    with pytest.raises(HarborRewardError, match=r"wrote no reward.*exited with 2.*assert failed"):
        reward_of(_report(exit_code=2, log_tail="assert failed"))
    with pytest.raises(HarborRewardError, match="ran past"):
        reward_of(_report(timed_out=True))
    with pytest.raises(HarborRewardError, match="not its report"):
        reward_of("1.0")


def test_the_tasks_settings_become_the_harness_and_container_settings(tmp_path: Path) -> None:
    tasks = load(EXAMPLES)
    harness = harbor_harness(tasks, ["sh", "/workspace/agent.sh", "{instruction}"])
    assert isinstance(harness, HarborHarness) and isinstance(harness.executor, DockerExecutor)
    assert (harness.timeout, harness.evaluator_timeout) == (120.0, 90.0)
    assert (harness.executor.limits.cpus, harness.executor.limits.memory_mb) == (1.0, 512)
    given = docker_input(tasks[0])
    assert given["dockerfile"] == str(tasks[0].environment_dir) and given["workdir"] == "/app"
    assert json.loads(given["harbor_verifier"]) == {"env": {}, "timeout": 60.0, "workdir": "/app"}
    shown, hidden = harness.task_view(given)
    assert set(shown) == {"harbor_task", "instruction", "workdir", "metadata"}
    assert set(hidden) <= set(HIDDEN_FIELDS) and "tests" in hidden
    assert task_limits(tasks).processes == 256  # the rest stays the executor's default


def test_what_the_executor_cannot_give_is_refused(tmp_path: Path) -> None:
    gpu = copy_task("write-greeting", tmp_path / "a")
    (gpu / "task.toml").write_text((gpu / "task.toml").read_text() + "gpus = 1\n")
    with pytest.raises(HarborTaskError, match="GPU"):
        harbor_harness(load(gpu), ["true"])
    one, two = copy_task("write-greeting", tmp_path / "b"), copy_task("count-lines", tmp_path / "c")
    for task, value in ((one, "a"), (two, "b")):
        (task / "task.toml").write_text((task / "task.toml").read_text() + f'env = {{ MODE = "{value}" }}\n')
    with pytest.raises(HarborTaskError, match="MODE differently"):
        harbor_harness([*load(one), *load(two)], ["true"])


def test_a_harness_profile_is_given_the_instruction(tmp_path: Path) -> None:
    tasks = load(EXAMPLES)
    harness = harbor_harness(tasks, profile="codex", executable="/bin/true")
    assert isinstance(harness, HarborHarness) and harness.profile is not None
    assert harness.profile.task == "{instruction}" and harness.name == "harbor:codex"
    assert harness.evaluator is not None and harness.evaluator[-1] == "{harbor_verifier}"
