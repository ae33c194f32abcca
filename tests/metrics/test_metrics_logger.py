"""MetricsLogger: fan-out to every sink; a failing sink is warned about once and dropped."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import pytest

from agentbolt.metrics import (
    JSONL_FILE_NAME,
    JsonlSink,
    MetricsLogger,
    MetricsSink,
    StoreSink,
    read_jsonl,
)
from agentbolt.store.memory import MemoryStore
from agentbolt.types import MetricValue


class ExplodingSink(MetricsSink):
    """A sink whose backend is down: every call fails."""

    def __init__(self) -> None:
        self.calls = 0
        self.closed = False

    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        self.calls += 1
        raise ConnectionError("tracker unreachable")

    async def close(self) -> None:
        self.closed = True


async def test_every_sink_gets_every_step(tmp_path: Path) -> None:
    store = MemoryStore()
    metrics = MetricsLogger([JsonlSink(tmp_path / "m.jsonl"), StoreSink(store, "r")])

    await metrics.log(0, {"a": 1.0})
    await metrics.log(1, {"a": 2.0})
    await metrics.close()

    assert [row["a"] for row in read_jsonl(tmp_path / "m.jsonl")] == [1.0, 2.0]
    assert [r.values["a"] for r in await store.query_metrics("r")] == [1.0, 2.0]


async def test_a_failing_sink_is_warned_about_once_and_disabled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = ExplodingSink()
    good = JsonlSink(tmp_path / "m.jsonl")
    metrics = MetricsLogger([broken, good])

    with caplog.at_level(logging.WARNING, logger="agentbolt.metrics"):
        for step in range(3):
            await metrics.log(step, {"loss": 1.0 / (step + 1)})
    await metrics.close()

    warnings = [r for r in caplog.records if r.name == "agentbolt.metrics"]
    assert len(warnings) == 1
    assert "ExplodingSink" in warnings[0].getMessage() and "disabled" in warnings[0].getMessage()
    assert broken.calls == 1
    assert metrics.disabled == [broken] and metrics.active == [good]
    assert [row["step"] for row in read_jsonl(tmp_path / "m.jsonl")] == [0, 1, 2]
    assert broken.closed, "disabled sinks are still closed"


async def test_from_names_builds_the_jsonl_and_store_sinks(tmp_path: Path) -> None:
    store = MemoryStore()
    async with MetricsLogger.from_names(["jsonl", "store"], run_dir=tmp_path, store=store, run_id="r") as metrics:
        await metrics.log(4, {"val/success_rate": 0.75})

    assert read_jsonl(tmp_path / JSONL_FILE_NAME)[0]["val/success_rate"] == 0.75
    assert (await store.query_metrics("r"))[0].step == 4


def test_an_unknown_sink_name_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'csv'.*jsonl, store, tensorboard, wandb, mlflow"):
        MetricsLogger.from_names(["jsonl", "csv"], run_dir=tmp_path)


def test_the_store_sink_needs_a_store_and_a_run_id(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="store= and run_id="):
        MetricsLogger.from_names(["store"], run_dir=tmp_path, run_id="r")


async def test_log_after_close_is_an_error(tmp_path: Path) -> None:
    metrics = MetricsLogger([JsonlSink(tmp_path / "m.jsonl")])
    await metrics.close()
    await metrics.close()  # idempotent
    with pytest.raises(RuntimeError, match="after close"):
        await metrics.log(0, {"a": 1})
