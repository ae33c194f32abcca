"""Harbor task directories as a dataset: the loader reads what Harbor's own `harbor tasks
init` writes (a task made by Harbor 0.26, kept under fixtures/) and our example tasks,
applies task.toml with Harbor's defaults, refuses what is not a task with what to do, reads
the verifier's reward as Harbor does, and names a base image this machine does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbolt.tasks.harbor import (
    HarborImageError,
    HarborRewardError,
    HarborTask,
    HarborTaskError,
    NetworkMode,
    base_images,
    load,
    read_verifier_reward,
    require_local_images,
)

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).with_name("fixtures")
INIT = FIXTURES / "harbor-init"
OURS = ROOT / "examples" / "harbor_tasks"


def test_a_task_made_by_harbor_tasks_init_loads_with_harbors_defaults() -> None:
    (task,) = load(INIT / "hello-world")
    assert task.name == "agentbolt/hello-world"
    assert task.config.task is not None and task.config.task.version == "1.0.0"
    assert task.config.agent.timeout_sec == 600.0  # what `harbor tasks init` writes
    assert task.config.verifier.timeout_sec == 600.0 and task.config.verifier.environment_mode == "separate"
    assert task.config.environment.build_timeout_sec == 600.0
    assert task.config.environment.network == NetworkMode.PUBLIC
    assert task.dockerfile is not None and task.test_script.is_file() and task.solve_script is not None
    assert base_images(task) == ["ubuntu:24.04"]
    assert task.rollout_config().timeout_seconds == 600.0 + 600.0 + 600.0


def test_our_example_tasks_load_as_a_dataset() -> None:
    tasks = load(OURS)
    assert [t.name for t in tasks] == ["agentbolt/count-lines", "agentbolt/fix-constant", "agentbolt/write-greeting"]
    assert all(t.solve_script is not None for t in tasks)
    task = tasks[0]
    assert task.config.environment.network == NetworkMode.NO_NETWORK
    assert (task.config.environment.cpus, task.config.environment.memory_mb) == (1, 512)
    assert {i for t in tasks for i in base_images(t)} == {"agentbolt-base:host"}
    given = task.rollout_input()
    assert given["instruction"].startswith("The file /app/words.txt") and given["metadata"]["difficulty"] == "easy"
    assert set(given) == {"harbor_task", "instruction", "task_dir", "metadata"}  # no verifier, no solution


def _task(tmp_path: Path, toml: str, *, dockerfile: str | None = "FROM busybox\n", test: bool = True,
          instruction: bool = True) -> Path:
    (tmp_path / "task.toml").write_text(toml)
    if instruction:
        (tmp_path / "instruction.md").write_text("do it")
    if dockerfile is not None:
        (tmp_path / "environment").mkdir()
        (tmp_path / "environment" / "Dockerfile").write_text(dockerfile)
    if test:
        (tmp_path / "tests").mkdir()
        (tmp_path / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    return tmp_path


def test_unknown_keys_are_ignored_and_the_deprecated_allow_internet_still_means_no_network(tmp_path: Path) -> None:
    task = HarborTask.read(_task(tmp_path, 'schema_version = "1.9"\n[environment]\nallow_internet = false\n'
                                           'future_knob = 3\n[brand_new_section]\nx = 1\n'))
    assert task.config.environment.network == NetworkMode.NO_NETWORK
    assert task.name == tmp_path.name and task.rollout_config().timeout_seconds is None  # no agent timeout


@pytest.mark.parametrize("kwargs, toml, message", [
    ({"instruction": False}, "", "no instruction.md"),
    ({"test": False}, "", "tests/test.sh is missing"),
    ({"dockerfile": None}, "", "has no environment"),
    ({}, "[agent\n", "not valid TOML"),
    ({}, "[agent]\ntimeout_sec = 'soon'\n", "does not follow Harbor's task schema"),
    ({}, '[[steps]]\nname = "a"\n', "multi-step"),
])
def test_what_is_not_a_runnable_task_is_refused_with_what_to_do(tmp_path: Path, kwargs: dict[str, bool],
                                                                toml: str, message: str) -> None:
    with pytest.raises(HarborTaskError, match=message):
        HarborTask.read(_task(tmp_path, toml, **kwargs))  # type: ignore[arg-type]


def test_a_directory_without_tasks_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HarborTaskError, match="holds no Harbor task"):
        load(tmp_path)


def test_base_images_skip_build_stages_and_scratch(tmp_path: Path) -> None:
    task = HarborTask.read(_task(tmp_path, "", dockerfile=(
        "FROM --platform=linux/amd64 golang:1.22 AS build\nRUN go build\n"
        "FROM build AS test\nFROM scratch\nFROM agentbolt-base:busybox\nCOPY --from=build /x /x\n")))
    assert base_images(task) == ["golang:1.22", "agentbolt-base:busybox"]

    class Have:
        def has(self, image: str) -> bool:
            return image == "agentbolt-base:busybox"

    with pytest.raises(HarborImageError, match=r"builds on the image 'golang:1.22'.*docker import") as caught:
        require_local_images(task, Have())
    assert caught.value.image == "golang:1.22"


def test_the_verifier_reward_is_read_as_harbor_reads_it(tmp_path: Path) -> None:
    (tmp_path / "reward.txt").write_text("0.75\n")
    assert read_verifier_reward(tmp_path).rewards == {"reward": 0.75}
    (tmp_path / "reward.json").write_text('{"tests_passed": 0.5, "style": 1}')  # reward.json wins
    with pytest.raises(HarborRewardError, match="several rewards"):
        read_verifier_reward(tmp_path)
    both = read_verifier_reward(tmp_path, primary="tests_passed")
    assert both.rewards == {"tests_passed": 0.5, "style": 1.0} and both.value == 0.5
    (tmp_path / "reward.json").write_text('{"reward": NaN}')
    with pytest.raises(HarborRewardError, match="not JSON"):
        read_verifier_reward(tmp_path)
    (tmp_path / "reward.json").write_text('{"reward": "1"}')
    with pytest.raises(HarborRewardError, match="finite numbers"):
        read_verifier_reward(tmp_path)
    with pytest.raises(HarborRewardError, match="wrote no reward"):
        read_verifier_reward(tmp_path / "missing")
