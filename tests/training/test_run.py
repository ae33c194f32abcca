"""``TrainingRun``, the run skeleton GRPO, SFT and GRPOPolicies share: a run of several
policies keeps each policy's checkpoints and export apart and resumes at the newest step
every policy saved; the steps stop once the time budget of training is spent — the
evaluations between them are not training time — or when the algorithm stops them; an
evaluation is logged with the version of every policy it evaluated."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from agentbolt.training import run as run_module
from agentbolt.training.run import TrainingRun

POLICIES = ["planner", "solver"]


class FakePolicy:
    """What a run saves and exports of a policy: its trainable weights, a model directory."""

    sharded = False  # the whole policy is in this process: checkpointed whole

    def __init__(self, value: float) -> None:
        self.value = value

    def trainable_state(self) -> dict[str, Any]:
        return {"w": torch.full((2,), self.value)}

    def export(self, path: str) -> Path:
        Path(path).mkdir(parents=True)
        return Path(path)


class Console:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def print(self, line: str) -> None:
        self.lines.append(line)


class Metrics:
    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, Any]]] = []

    async def log(self, step: int, values: dict[str, Any]) -> None:
        self.rows.append((step, dict(values)))


class Evaluation:
    def metrics(self, version: int | None) -> dict[str, Any]:
        return {"val/success_rate": 0.5, "val/policy_version": version}


def _run(tmp_path: Path, policies: list[str] = POLICIES, console: Any = None) -> TrainingRun:
    return TrainingRun("GRPO", console or Console(), run_dir=str(tmp_path / "run"), run_name=None,
                       keep_checkpoints=10, policies=policies)


async def test_each_policy_is_checkpointed_and_exported_in_its_own_directory(tmp_path: Path) -> None:
    run = _run(tmp_path)
    for i, name in enumerate(POLICIES):
        await run.save(1, FakePolicy(i), {"steps": 1}, {"policy_version": 1}, of=name)

    assert all((tmp_path / "run" / name / "checkpoints" / "step-000001").is_dir() for name in POLICIES)
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert await run.export(FakePolicy(0), None, of="planner", version=1) == tmp_path / "run" / "planner" / "model"
    assert await run.export(FakePolicy(1), str(tmp_path / "out"), of="solver") == tmp_path / "out" / "solver"


async def test_a_run_of_several_policies_resumes_at_the_newest_step_every_policy_saved(tmp_path: Path) -> None:
    first = _run(tmp_path)
    for step in (1, 2):
        for i, name in enumerate(POLICIES):
            if (name, step) != ("solver", 2):  # a crash between the two policies' saves of step 2
                await first.save(step, FakePolicy(10 * step + i), {}, {"policy_version": step}, of=name)

    found = _run(tmp_path).resume_policies(True)

    assert found is not None
    assert {name: c.step for name, c in found.items()} == {"planner": 1, "solver": 1}
    assert [float(found[name].weights["w"][0]) for name in POLICIES] == [10.0, 11.0]  # each its own weights
    assert _run(tmp_path).resume_policies(False) is None


def test_no_checkpoint_of_a_common_step_starts_afresh_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = _run(tmp_path)
    run.policy_checkpoints["planner"].save(3, FakePolicy(0).trainable_state(), {}, {})
    with caplog.at_level(logging.WARNING, logger="agentbolt.training"):
        assert run.resume_policies(True) is None
    assert "no checkpoint of a common step" in caplog.text and "planner" in caplog.text
    assert _run(tmp_path / "fresh").resume_policies(True) is None


class Clock:
    """``time.monotonic`` for the run module, moved on by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_steps_continue_after_the_done_ones_until_the_time_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    console = Console()
    run = _run(tmp_path, policies=[], console=console)
    assert list(run.steps(2, 5, None)) == [3, 4, 5]

    clock = Clock()
    monkeypatch.setattr(run_module, "time", clock)
    steps = []
    for step in run.steps(0, 10, 3.0):
        steps.append(step)
        clock.now += 1.5  # each step takes 1.5 s
    assert steps == [1, 2, 3]  # none starts after 3 s: the third starts at exactly 3 s
    assert console.lines[-1] == "[bold]GRPO[/]: time budget of 3 s of training spent after 3 steps (evaluations " \
                                "excluded)"
    assert run.training_seconds == 4.5


async def test_evaluations_between_the_steps_are_not_training_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    console = Console()
    run = _run(tmp_path, policies=[], console=console)
    run.metrics = Metrics()
    clock = Clock()
    monkeypatch.setattr(run_module, "time", clock)

    async def slow_evaluation() -> Evaluation:
        clock.now += 100.0
        return Evaluation()

    await run.evaluate(slow_evaluation, 0, 0)  # before the steps: not counted anywhere
    steps = []
    for step in run.steps(0, 10, 5.0):
        steps.append(step)
        clock.now += 2.0
        with run.evaluating():  # an algorithm's own mid-run evaluation (GRPO's eval_every)
            clock.now += 30.0
        assert run.training_seconds == 2.0 * step
    await run.evaluate(slow_evaluation, 3, 3)  # after them: the training time stays what it was

    assert steps == [1, 2, 3]  # 6 s of training by the end of the third, 96 s of wall time
    assert run.training_seconds == 6.0
    assert "time budget of 5 s of training spent after 3 steps" in console.lines[-1]


def test_an_algorithm_stops_the_steps_after_the_current_one_and_says_why(tmp_path: Path) -> None:
    console = Console()
    run = _run(tmp_path, policies=[], console=console)
    steps = []
    for step in run.steps(0, 10, None):
        steps.append(step)
        if step == 4:
            run.stop("training success rate at or above 90% for 2 steps in a row")
    assert steps == [1, 2, 3, 4]
    assert console.lines[-1].startswith("[bold]GRPO[/]: stopped after 4 steps (")
    assert console.lines[-1].endswith("s of training): training success rate at or above 90% for 2 steps in a row")
    assert list(run.steps(4, 6, None)) == [5, 6]  # a new run of steps starts without the stop


async def test_an_evaluation_of_several_policies_is_logged_with_each_policy_version(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.metrics = Metrics()

    async def evaluate() -> Evaluation:
        return Evaluation()

    await run.evaluate(evaluate, 0, {"planner": 2, "solver": 3})
    await run.evaluate(evaluate, 4, 7)

    assert run.metrics.rows == [
        (0, {"val/success_rate": 0.5, "val/policy_version": None, "planner/policy_version": 2,
             "solver/policy_version": 3}),
        (4, {"val/success_rate": 0.5, "val/policy_version": 7}),
    ]
