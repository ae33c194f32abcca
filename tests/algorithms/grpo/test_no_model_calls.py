"""A rollout that succeeded without a recorded model call (a cache answered, a client agentbolt
does not see) trains nothing: GRPO counts it per step, leaves it out of the training data and
says so in one line, in the words ``Trainer.dev`` and the runner use."""

from __future__ import annotations

import logging

import pytest
from adapters.test_samples import call, reward

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.algorithms.grpo.groups import Group
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, RolloutConfig


async def _succeeded(store: MemoryStore, *, with_call: bool) -> str:
    """A rollout that succeeded with reward 1, after one model call or none."""
    rollout = await store.enqueue_rollout({"task": 0}, config=RolloutConfig(max_attempts=1))
    claim = await store.claim_rollout("w")
    assert claim is not None
    rid, aid = rollout.rollout_id, claim.attempt.attempt_id
    if with_call:
        await store.add_span(call(f"{rid}-c", [1, 2, 3], [4, 5], rollout=rid).model_copy(update={"attempt_id": aid}))
    await store.add_span(reward(1.0, t=1, rollout=rid).model_copy(update={"attempt_id": aid}))
    await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
    return rid


async def test_rollouts_without_a_model_call_are_counted_left_out_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    called, cached, also_cached = [await _succeeded(store, with_call=c) for c in (True, False, False)]
    group = Group("g0", 0, [called, cached, also_cached], 0,
                  rollouts=[await store.get_rollout(r) for r in (called, cached, also_cached)])
    with caplog.at_level(logging.WARNING, "agentbolt"):
        batch = await GRPO(GRPOConfig())._collect(AlgorithmContext(store=store), [group])

    assert batch.metrics(1.0)["rollouts/no_model_calls"] == 2
    assert {s.rollout_id for s in batch.samples} == {called}
    (line,) = [r.getMessage() for r in caplog.records if "made no recorded model call" in r.getMessage()]
    assert line.startswith("GRPO: 2 of 3 rollouts made no recorded model call") and "cache=False" in line

