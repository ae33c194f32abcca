"""``Evaluate``: scoring rules (failures are not zeros), the table, and a real run."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from rich.console import Console

import agentbolt.algorithms
import agentbolt.algorithms
from agentbolt.algorithms import AlgorithmContext, Evaluate, EvaluationResult, EvaluationRow
from agentbolt.runner import Runner
from agentbolt.store.memory import MemoryStore
from agentbolt.types import RolloutConfig, RolloutMode, RolloutStatus


def row(i: int, status: RolloutStatus, reward: float | None) -> EvaluationRow:
    return EvaluationRow(i, f"ro-{i}", {"i": i}, status, reward, 1, 0.1)


def test_scores_count_only_scored_rollouts() -> None:
    result = EvaluationResult(
        mode=RolloutMode.VAL,
        threshold=0.5,
        rows=(
            row(0, RolloutStatus.SUCCEEDED, 1.0),
            row(1, RolloutStatus.SUCCEEDED, 0.25),
            row(2, RolloutStatus.SUCCEEDED, 0.5),
            row(3, RolloutStatus.FAILED, None),  # infrastructure failure: not a zero
            row(4, RolloutStatus.SUCCEEDED, None),  # finished without a reward
        ),
    )
    assert (result.n_total, result.n_succeeded, result.n_failed, result.n_scored) == (5, 4, 1, 3)
    assert result.mean_reward == pytest.approx(0.5833333)
    assert result.success_rate == pytest.approx(2 / 3)
    summary = result.summary()
    assert "1 failed (not scored)" in summary and "1 finished without a reward" in summary


def test_nothing_scored_gives_no_scores() -> None:
    result = EvaluationResult(RolloutMode.TEST, 1.0, (row(0, RolloutStatus.FAILED, None),))
    assert result.mean_reward is None and result.success_rate is None
    assert "mean reward n/a" in result.summary()


def test_table_lists_every_rollout() -> None:
    rows = tuple(row(i, RolloutStatus.SUCCEEDED, i / 10) for i in range(5))
    out = io.StringIO()
    Console(file=out, width=200).print(EvaluationResult(RolloutMode.VAL, 1.0, rows).table(max_rows=3))
    text = out.getvalue()
    assert "ro-0" in text and "ro-2" in text and "ro-3" not in text
    assert "2 more rows not shown" in text


def test_train_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="'val' or 'test'"):
        Evaluate(mode="train")


async def test_evaluate_runs_the_dataset_in_val_mode_and_reports() -> None:
    store = MemoryStore()
    modes: list[RolloutMode] = []

    def agent(task: dict[str, Any], rollout: Any) -> float:
        modes.append(rollout.mode)
        if task["x"] == 3:
            raise ValueError("cannot do 3")
        return 1.0 if task["x"] % 2 == 0 else 0.0

    stop = asyncio.Event()
    runner = asyncio.create_task(Runner(agent, store=store, concurrency=4).run(stop=stop))
    out = io.StringIO()
    ctx = AlgorithmContext(store, train_dataset=[{"x": 9}], val_dataset=[{"x": i} for i in range(6)],
                           rollout_config=RolloutConfig(max_attempts=1))
    result = await Evaluate(threshold=1.0, console=Console(file=out, width=200)).run(ctx)
    stop.set()
    await runner

    assert set(modes) == {RolloutMode.VAL}
    assert [r.input["x"] for r in result.rows] == list(range(6))  # dataset order
    assert result.n_failed == 1 and result.n_scored == 5
    assert result.mean_reward == pytest.approx(0.6) and result.success_rate == pytest.approx(0.6)
    failed = next(r for r in result.rows if r.status == RolloutStatus.FAILED)
    assert failed.error == "ValueError: cannot do 3"
    text = out.getvalue()
    assert "Evaluation (val)" in text and "ValueError: cannot do 3" in text and "mean reward 0.6000" in text


async def test_context_wait_returns_unfinished_rollouts_after_timeout() -> None:
    store = MemoryStore()
    ctx = AlgorithmContext(store)
    rollouts = await ctx.enqueue([1, 2], mode="test")
    assert [r.metadata["dataset_index"] for r in rollouts] == [0, 1]
    assert all(r.mode == RolloutMode.TEST for r in rollouts)
    waited = await ctx.wait(rollouts, timeout=0.05)
    assert [r.status for r in waited] == [RolloutStatus.QUEUING, RolloutStatus.QUEUING]
