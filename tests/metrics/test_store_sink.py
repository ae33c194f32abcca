"""StoreSink: each logged step becomes a MetricRecord in a real store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentbolt.metrics import StoreSink
from agentbolt.store.base import Store
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "store.db")
    async with s:
        yield s


async def test_logged_steps_are_stored_under_the_run_id(store: Store) -> None:
    sink = StoreSink(store, "grpo-run-1")

    await sink.log(0, {"train/reward_mean": 0.1})
    await sink.log(1, {"train/reward_mean": 0.3})
    await sink.log(1, {"val/success_rate": 0.5})  # eval of the same step, later
    await sink.close()

    records = await store.query_metrics("grpo-run-1")
    assert [(r.step, r.values) for r in records] == [
        (0, {"train/reward_mean": 0.1}),
        (1, {"train/reward_mean": 0.3, "val/success_rate": 0.5}),
    ]
    assert await store.metric_runs() == ["grpo-run-1"]


def test_a_store_sink_needs_a_run_id() -> None:
    with pytest.raises(ValueError, match="run_id"):
        StoreSink(MemoryStore(), "")
