"""A selected rollout that made no recorded model call (a cache answered it) gives SFT no
chat record: it is counted (``<source>/no_model_calls``) and logged in one line."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.sft import SFT, SFTConfig
from agentbolt.store.memory import MemoryStore
from algorithms.stored_rollouts import succeeded_rollout


async def test_selected_rollouts_without_a_model_call_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    ids = [await succeeded_rollout(store, i, with_call=i == 0) for i in range(3)]
    rollouts = [await store.get_rollout(r) for r in ids]
    values: dict[str, Any] = {}
    with caplog.at_level(logging.WARNING, "agentbolt"):
        records = await SFT(SFTConfig(min_reward=1.0))._from_rollouts(AlgorithmContext(store=store), rollouts,
                                                                       values, "sample")

    assert len(records) == 1  # the one rollout that called the model
    assert values["sample/selected"] == 3 and values["sample/no_model_calls"] == 2
    (line,) = [r.getMessage() for r in caplog.records if "made no recorded model call" in r.getMessage()]
    assert line.startswith("SFT (sample, selected): 2 of 3 rollouts made no recorded model call")
    assert "cache=False" in line
