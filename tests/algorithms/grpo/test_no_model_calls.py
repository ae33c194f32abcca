"""A rollout that succeeded without a recorded model call (a cache answered, a client agentbolt
does not see) trains nothing: GRPO counts it per step, leaves it out of the training data and
says so in one line, in the words ``Trainer.dev`` and the runner use."""

from __future__ import annotations

import logging

import pytest

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.algorithms.grpo.groups import Group
from agentbolt.store.memory import MemoryStore
from algorithms.stored_rollouts import succeeded_rollout


async def test_rollouts_without_a_model_call_are_counted_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    called, cached, also_cached = [await succeeded_rollout(store, with_call=c) for c in (True, False, False)]
    group = Group("g0", 0, [called, cached, also_cached], 0,
                  rollouts=[await store.get_rollout(r) for r in (called, cached, also_cached)])
    with caplog.at_level(logging.WARNING, "agentbolt"):
        batch = await GRPO(GRPOConfig()).collect(AlgorithmContext(store=store), [group])

    assert batch.metrics(1.0)["rollouts/no_model_calls"] == 2
    assert {s.rollout_id for s in batch.samples} == {called}
    (line,) = [r.getMessage() for r in caplog.records if "made no recorded model call" in r.getMessage()]
    assert line.startswith("GRPO: 2 of 3 rollouts made no recorded model call") and "cache=False" in line

