"""``TrainingRun``, the run skeleton GRPO, SFT and GRPOPolicies share: a run of several
policies keeps each policy's checkpoints and export apart and resumes at the newest step
every policy saved; the steps stop once the time budget is spent; an evaluation is logged
with the version of every policy it evaluated."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
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


def test_steps_continue_after_the_done_ones_until_the_time_budget_is_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    console = Console()
    run = _run(tmp_path, policies=[], console=console)
    assert list(run.steps(2, 5, None)) == [3, 4, 5]

    clock = iter([0.0, 1.0, 2.0, 3.5, 4.0])  # the start, then one reading before each step
    monkeypatch.setattr(run_module, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    assert list(run.steps(0, 10, 3.0)) == [1, 2]
    assert console.lines[-1] == "[bold]GRPO[/]: time budget of 3 s spent after 2 steps"


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
