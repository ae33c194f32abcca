"""failure_reward: a rollout the agent program itself failed (its own exception, after a
successful model call) enters its group with that reward instead of being left out; an
infrastructure failure (timeout, lost worker, retryable error, no successful call,
cancelled) never does. Off by default."""

from __future__ import annotations

from typing import Any

from adapters.test_samples import call, reward

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.algorithms.grpo.failures import program_failure
from agentbolt.algorithms.grpo.groups import Group
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Attempt, AttemptStatus, ErrorInfo, Rollout, RolloutConfig, RolloutStatus

CRASH = ErrorInfo(type="JSONDecodeError", message="Expecting value: line 1 column 1 (char 0)")


async def _rollout(store: MemoryStore, outcome: str) -> str:
    """One finished train rollout: ``ok`` (reward 1 after a call), ``crash`` (the agent raised after a call),
    ``crash_no_call``, ``timeout`` (after a call), ``retryable`` (after a call)."""
    rollout = await store.enqueue_rollout({"task": 0}, config=RolloutConfig(max_attempts=1))  # no retry
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == rollout.rollout_id
    rid, aid = rollout.rollout_id, claim.attempt.attempt_id
    if outcome != "crash_no_call":
        span = call(f"{rid}-c", [1, 2, 3], [4, 5], rollout=rid)
        await store.add_span(span.model_copy(update={"attempt_id": aid}))
    if outcome == "ok":
        await store.add_span(reward(1.0, t=1, rollout=rid).model_copy(update={"attempt_id": aid}))
        await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
    elif outcome == "timeout":
        await store.update_attempt(rid, aid, status=AttemptStatus.TIMEOUT)
    else:
        error = CRASH if outcome != "retryable" else CRASH.model_copy(update={"retryable": True})
        await store.update_attempt(rid, aid, status=AttemptStatus.FAILED, error=error)
    return rid


async def _collect(failure_reward: float | None, outcomes: list[str]) -> tuple[Any, list[str]]:
    store = MemoryStore()
    store_ids = [await _rollout(store, outcome) for outcome in outcomes]
    rollouts = [await store.get_rollout(r) for r in store_ids]
    assert all(r.status.is_terminal for r in rollouts), [r.status for r in rollouts]
    group = Group("g0", 0, store_ids, 0, rollouts=rollouts)
    grpo = GRPO(GRPOConfig(failure_reward=failure_reward))
    batch = await grpo.collect(AlgorithmContext(store=store), [group])
    return batch, store_ids


async def test_a_program_failure_enters_its_group_with_the_failure_reward() -> None:
    batch, (ok, crash) = await _collect(-1.0, ["ok", "crash"])
    members = {m.rollout_id: m for m in batch.members["g0"]}
    assert not members[crash].failed and members[crash].reward == -1.0
    assert {s.rollout_id for s in batch.samples} == {ok, crash}  # its tokens are trained, pushed down
    assert batch.metrics(1.0)["rollouts/program_failures"] == 1


async def test_off_by_default_failed_rollouts_stay_out() -> None:
    batch, (ok, crash) = await _collect(None, ["ok", "crash"])
    members = {m.rollout_id: m for m in batch.members["g0"]}
    assert members[crash].failed and {s.rollout_id for s in batch.samples} == {ok}


async def test_infrastructure_failures_are_never_penalised() -> None:
    batch, ids = await _collect(-1.0, ["ok", "timeout", "retryable", "crash_no_call"])
    members = {m.rollout_id: m for m in batch.members["g0"]}
    assert [members[r].failed for r in ids] == [False, True, True, True]
    assert {s.rollout_id for s in batch.samples} == {ids[0]}
    assert batch.metrics(1.0)["rollouts/program_failures"] == 0


def test_what_counts_as_the_programs_failure() -> None:
    def attempt(status: AttemptStatus, error: ErrorInfo | None) -> Attempt:
        return Attempt(attempt_id="a", rollout_id="r", sequence_id=1, status=status, error=error)

    failed = Rollout(rollout_id="r", status=RolloutStatus.FAILED)
    assert program_failure(failed, attempt(AttemptStatus.FAILED, CRASH))
    assert not program_failure(failed, attempt(AttemptStatus.FAILED, None))
    assert not program_failure(failed, attempt(AttemptStatus.FAILED, CRASH.model_copy(update={"retryable": True})))
    assert not program_failure(failed, attempt(AttemptStatus.TIMEOUT, CRASH))
    assert not program_failure(failed, attempt(AttemptStatus.UNRESPONSIVE, None))
    assert not program_failure(Rollout(rollout_id="r", status=RolloutStatus.CANCELLED),
                               attempt(AttemptStatus.FAILED, CRASH))
    assert not program_failure(failed, None)
