"""The runner across a store outage: what it must not lose when calls fail and come back.

The store here is a real :class:`MemoryStore` whose chosen calls fail with
``StoreUnavailableError`` — before or *after* the store applied them (the answer lost,
as when a server is killed between its commit and its reply) — a given number of times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from agentbolt.runner import Runner
from agentbolt.store.errors import StoreUnavailableError
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import Tracer, emit_message
from agentbolt.types import AttemptStatus, Claim, RolloutConfig, RolloutStatus, Span


class OutageStore(MemoryStore):
    """Fails the next ``failures[name]`` calls of method ``name``; with ``after=True`` the
    call is applied first and only its answer is lost."""

    def __init__(self, failures: dict[str, int], *, after: bool = False) -> None:
        super().__init__(deadline_check_interval=0.02)
        self.failures = dict(failures)
        self.after = after
        self.calls: dict[str, list[Any]] = {}

    def _trip(self, name: str) -> None:
        if self.failures.get(name, 0) > 0:
            self.failures[name] -= 1
            raise StoreUnavailableError(f"{name}: the server is restarting")

    async def claim_rollouts(
        self, worker_id: str | None = None, limit: int = 1, request_id: str | None = None
    ) -> list[Claim]:
        self.calls.setdefault("claim_rollouts", []).append(request_id)
        if not self.after:
            self._trip("claim_rollouts")
        claims = await super().claim_rollouts(worker_id, limit, request_id)
        self._trip("claim_rollouts")
        return claims

    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        self._trip("add_spans")
        return await super().add_spans(spans)

    async def update_attempt(self, rollout_id: str, attempt_id: str, **kw: Any):  # type: ignore[override]
        self.calls.setdefault("update_attempt", []).append(kw.get("status"))
        if not self.after:
            self._trip("update_attempt")
        attempt = await super().update_attempt(rollout_id, attempt_id, **kw)
        self._trip("update_attempt")
        return attempt


def agent(task: str) -> float:
    emit_message(task)
    return 1.0


async def test_a_claim_whose_answer_was_lost_is_asked_again_with_its_request_id_and_nothing_is_orphaned() -> None:
    store = OutageStore({"claim_rollouts": 1}, after=True)
    r = await store.enqueue_rollout("t", config=RolloutConfig(unresponsive_seconds=30))
    stats = await Runner(agent, store=store, poll_interval=0.01).run(stop_when_idle=True)

    first, second = store.calls["claim_rollouts"][:2]
    assert first is not None and second == first  # the same request: the store replays its claim
    attempts = await store.query_attempts(r.rollout_id)
    assert [a.status for a in attempts] == [AttemptStatus.SUCCEEDED]  # one attempt, not an orphan + a new one
    assert stats.claimed == 1 and stats.succeeded == 1


@pytest.mark.parametrize("after", [False, True], ids=["refused", "answer-lost"])
async def test_an_outcome_is_reported_again_until_the_store_takes_it(after: bool) -> None:
    store = OutageStore({"update_attempt": 3}, after=after)
    r = await store.enqueue_rollout("t")
    runner = Runner(agent, store=store, report_patience=30)
    stats = await runner.run(stop_when_idle=True)

    assert store.calls["update_attempt"] == [AttemptStatus.SUCCEEDED] * 4
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.SUCCEEDED
    assert [a.status for a in await store.query_attempts(r.rollout_id)] == [AttemptStatus.SUCCEEDED]
    assert stats.succeeded == 1


async def test_an_outcome_is_given_up_after_the_report_patience() -> None:
    store = OutageStore({"update_attempt": 1000})
    r = await store.enqueue_rollout("t")
    await Runner(agent, store=store, report_patience=0.5).run(stop_when_idle=True)
    assert 2 <= len(store.calls["update_attempt"]) <= 4  # retried 0.2 s, 0.4 s apart, then left
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.RUNNING  # it will time out


async def test_a_success_whose_spans_could_not_be_stored_is_reported_as_a_retryable_failure() -> None:
    store = OutageStore({"add_spans": 1})
    r = await store.enqueue_rollout("t", config=RolloutConfig(max_attempts=2))
    tracer = Tracer(store, max_retries=0, auto_instrument=False)  # give up on the first failure
    stats = await Runner(agent, store=store, tracer=tracer).run(stop_when_idle=True)

    first, second = await store.query_attempts(r.rollout_id)
    assert first.status == AttemptStatus.FAILED
    assert first.error is not None and first.error.type == "SpansNotStored" and first.error.retryable
    assert second.status == AttemptStatus.SUCCEEDED  # run again, with its whole trace
    names = sorted(s.name for s in await store.get_spans(r.rollout_id, second.attempt_id))
    assert names == ["agentbolt.message", "agentbolt.reward", "agentbolt.rollout"]
    assert (stats.failed, stats.succeeded) == (1, 1)
