"""TensorBoardSink against the real TensorBoard: the event file reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbolt.metrics import MetricsLogger, TENSORBOARD_DIR_NAME

pytest.importorskip("tensorboard")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


async def test_scalars_read_back_from_the_event_file(tmp_path: Path) -> None:
    async with MetricsLogger.from_names(["tensorboard"], run_dir=tmp_path) as metrics:
        await metrics.log(0, {"train/reward_mean": 0.25, "kl": None})
        await metrics.log(1, {"train/reward_mean": 0.5, "tokens": 128})
        assert metrics.disabled == []

    acc = event_accumulator.EventAccumulator(str(tmp_path / TENSORBOARD_DIR_NAME))
    acc.Reload()

    assert set(acc.Tags()["scalars"]) == {"train/reward_mean", "tokens"}  # None skipped
    assert [(e.step, e.value) for e in acc.Scalars("train/reward_mean")] == [(0, 0.25), (1, 0.5)]
    assert [(e.step, e.value) for e in acc.Scalars("tokens")] == [(1, 128.0)]
