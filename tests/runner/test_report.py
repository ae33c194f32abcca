"""Reporting an outcome with the claim of the runner's next rollout: one store call per
rollout instead of two, within the runner's limits, and nothing claimed is left unrun."""

from __future__ import annotations

import asyncio
from typing import Any

from agentbolt.runner import Runner
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, Claim, ReportAndClaim, RolloutStatus


class CountingStore(MemoryStore):
    """A memory store that counts the claims and reports it is sent; ``on_report`` runs
    after a report with a claim was applied, before it answers."""

    def __init__(self) -> None:
        super().__init__(deadline_check_interval=0.02)
        self.claims = 0
        self.reports_with_claims = 0
        self.plain_reports = 0
        self.on_report: Any = None

    async def claim_rollouts(
        self, worker_id: str | None = None, limit: int = 1, request_id: str | None = None
    ) -> list[Claim]:
        self.claims += 1
        return await super().claim_rollouts(worker_id, limit, request_id)

    async def report_and_claim(self, rollout_id: str, attempt_id: str, **kw: Any) -> ReportAndClaim:
        self.reports_with_claims += 1
        self.claims -= 1  # the default makes its claim through claim_rollouts: not a call of the runner's
        done = await super().report_and_claim(rollout_id, attempt_id, **kw)
        if self.on_report is not None:
            self.on_report()
        return done

    async def update_attempt(self, rollout_id: str, attempt_id: str, **kw: Any):  # type: ignore[override]
        self.plain_reports += 1
        return await super().update_attempt(rollout_id, attempt_id, **kw)


async def test_each_report_claims_the_next_rollout_so_the_runner_seldom_claims_alone() -> None:
    store = CountingStore()
    rollouts = [await store.enqueue_rollout(i) for i in range(10)]
    stats = await Runner(lambda task: 1.0, store=store, concurrency=1).run(stop_when_idle=True)

    assert stats.claimed == stats.succeeded == 10
    assert store.reports_with_claims == 10
    assert store.claims == 2, "the first claim, and the one that found the queue empty"
    assert store.plain_reports == 10, "MemoryStore's report_and_claim reports through update_attempt"
    for r in rollouts:
        assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.SUCCEEDED


async def test_successors_never_take_the_runner_past_max_rollouts() -> None:
    store = CountingStore()
    for i in range(10):
        await store.enqueue_rollout(i)
    stats = await Runner(lambda task: 1.0, store=store, concurrency=3).run(max_rollouts=7)

    assert stats.claimed == stats.succeeded == 7
    assert (await store.stats()).queue_depth == 3
    assert (await store.stats()).total_attempts == 7


async def test_a_successor_claimed_as_the_runner_stops_goes_back_to_the_queue_unrun() -> None:
    store = CountingStore()
    first = await store.enqueue_rollout("first")
    second = await store.enqueue_rollout("second")
    ran: list[str] = []
    stop = asyncio.Event()
    store.on_report = stop.set  # the runner is told to stop while its report (and claim) is on the way

    def agent(task: str) -> float:
        ran.append(task)
        return 1.0

    stats = await Runner(agent, store=store, concurrency=1).run(stop=stop)

    assert ran == ["first"] and stats.claimed == 1
    assert (await store.get_rollout(first.rollout_id)).status == RolloutStatus.SUCCEEDED
    back = await store.get_rollout(second.rollout_id)
    assert back.status == RolloutStatus.REQUEUING, "given back: another runner will take it"
    (attempt,) = await store.query_attempts(second.rollout_id)
    assert attempt.status == AttemptStatus.FAILED
    assert attempt.error is not None and attempt.error.type == "RunnerShutdown" and attempt.error.retryable
