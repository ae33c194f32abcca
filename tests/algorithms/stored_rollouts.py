"""Rollouts put in a store by hand for the algorithms' data-selection tests."""

from __future__ import annotations

from adapters.test_samples import call, reward

from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, RolloutConfig


async def succeeded_rollout(store: MemoryStore, task: int = 0, *, with_call: bool) -> str:
    """A rollout that succeeded with reward 1 after one recorded model call, or after none
    (as when a cache answered); returns its id."""
    rollout = await store.enqueue_rollout({"task": task}, config=RolloutConfig(max_attempts=1))
    claim = await store.claim_rollout("w")
    assert claim is not None
    rid, aid = rollout.rollout_id, claim.attempt.attempt_id
    if with_call:
        await store.add_span(call(f"{rid}-c", [1, 2, 3], [4, 5], rollout=rid).model_copy(update={"attempt_id": aid}))
    await store.add_span(reward(1.0, t=1, rollout=rid).model_copy(update={"attempt_id": aid}))
    await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
    return rid
