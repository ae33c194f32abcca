"""The runner: outcomes, rewards, retries, hooks, stopping agents, concurrency, shutdown."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agentbolt.runner import AttemptStopped, Hooks, RetryableError, Runner
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import emit_message, emit_reward
from agentbolt.types import LLM, AttemptStatus, RolloutConfig, RolloutStatus, Span, WorkerStatus


async def spans_named(store: MemoryStore, rollout_id: str, name: str) -> list[Span]:
    return [s for s in await store.get_spans(rollout_id) if s.name == name]


# --------------------------------------------------------------------------- outcomes
async def test_success_is_reported_with_spans_and_worker(store: MemoryStore) -> None:
    def agent(task: str) -> None:
        emit_message(f"working on {task}")

    r = await store.enqueue_rollout("t1")
    runner = Runner(agent, store=store, worker_id="w-1")
    stats = await runner.run(stop_when_idle=True)

    assert (stats.claimed, stats.succeeded, stats.failed, stats.stopped) == (1, 1, 0, 0)
    done = await store.get_rollout(r.rollout_id)
    assert done.status == RolloutStatus.SUCCEEDED
    attempt = (await store.query_attempts(r.rollout_id))[0]
    assert attempt.status == AttemptStatus.SUCCEEDED and attempt.worker_id == "w-1"
    names = [s.name for s in await store.get_spans(r.rollout_id)]
    assert "agentbolt.rollout" in names and "agentbolt.message" in names
    worker = await store.get_worker("w-1")
    assert worker.status == WorkerStatus.OFFLINE
    assert worker.metadata["kind"] == "runner" and worker.metadata["agent"] == "agent"


async def test_float_return_becomes_a_reward_span(store: MemoryStore) -> None:
    r = await store.enqueue_rollout(None)
    await Runner(lambda task: 0.75, store=store).run(stop_when_idle=True)
    rewards = await spans_named(store, r.rollout_id, "agentbolt.reward")
    assert len(rewards) == 1 and rewards[0].attributes["agentbolt.reward.value"] == 0.75
    assert (await store.get_rollout(r.rollout_id)).reward == 0.75


async def test_exception_fails_the_attempt_with_exception_span_and_traceback(store: MemoryStore) -> None:
    def broken_agent(task: Any) -> float:
        raise ValueError("the tool returned garbage")

    r = await store.enqueue_rollout(1)
    stats = await Runner(broken_agent, store=store).run(stop_when_idle=True)

    assert stats.failed == 1
    done = await store.get_rollout(r.rollout_id)
    assert done.status == RolloutStatus.FAILED  # not retryable: one attempt only
    attempt = (await store.query_attempts(r.rollout_id))[0]
    assert attempt.status == AttemptStatus.FAILED
    assert attempt.error is not None
    assert attempt.error.type == "ValueError"
    assert attempt.error.message == "the tool returned garbage"
    assert attempt.error.traceback is not None and "broken_agent" in attempt.error.traceback
    exc_spans = await spans_named(store, r.rollout_id, "agentbolt.exception")
    assert len(exc_spans) == 1
    assert exc_spans[0].attributes["exception.type"].endswith("ValueError")
    root = (await spans_named(store, r.rollout_id, "agentbolt.rollout"))[0]
    assert root.status.value == "error" and "the tool returned garbage" in (root.status_message or "")


async def test_retryable_failure_is_retried_until_it_succeeds(store: MemoryStore) -> None:
    def flaky(task: Any, rollout: Any) -> float:
        if rollout.attempt_count < 2:
            raise RetryableError("model server hiccup")
        return 1.0

    r = await store.enqueue_rollout(1, config=RolloutConfig(max_attempts=3))
    stats = await Runner(flaky, store=store).run(stop_when_idle=True)

    assert (stats.claimed, stats.failed, stats.succeeded) == (2, 1, 1)
    done = await store.get_rollout(r.rollout_id)
    assert done.status == RolloutStatus.SUCCEEDED and done.attempt_count == 2
    first, second = await store.query_attempts(r.rollout_id)
    assert first.status == AttemptStatus.FAILED and first.error is not None and first.error.retryable is True
    assert second.status == AttemptStatus.SUCCEEDED


async def test_connection_errors_count_as_retryable(store: MemoryStore) -> None:
    def agent(task: Any) -> float:
        raise ConnectionError("model endpoint refused the connection")

    r = await store.enqueue_rollout(1, config=RolloutConfig(max_attempts=2))
    await Runner(agent, store=store).run(stop_when_idle=True)
    assert (await store.get_rollout(r.rollout_id)).attempt_count == 2


# --------------------------------------------------------------------------- hooks
class Recorder:
    """A plain object with all four hooks (mixing sync and async)."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def on_rollout_start(self, rollout: Any) -> None:
        self.events.append("rollout_start")

    async def on_trace_start(self, *, rollout: Any, attempt: Any, tracer: Any) -> None:
        assert attempt.rollout_id == rollout.rollout_id and tracer is not None
        self.events.append("trace_start")

    def on_trace_end(self, *, rollout: Any, attempt: Any, tracer: Any) -> None:
        self.events.append("trace_end")

    async def on_rollout_end(self, rollout: Any, spans: list[Span]) -> None:
        self.events.append(f"rollout_end:{rollout.status.value}:{len(spans)}")


async def test_hooks_run_in_order_around_the_agent(store: MemoryStore) -> None:
    events: list[str] = []

    def agent(task: Any) -> None:
        events.append("agent")

    await store.enqueue_rollout(1)
    await Runner(agent, store=store, hooks=Recorder(events)).run(stop_when_idle=True)
    assert events[:4] == ["rollout_start", "trace_start", "agent", "trace_end"]
    assert events[4].startswith("rollout_end:succeeded:")
    assert int(events[4].rsplit(":", 1)[1]) >= 1  # the spans of the attempt


async def test_a_hook_can_emit_the_reward(store: MemoryStore) -> None:
    class Judge:  # only one hook, declaring only the argument it uses
        def on_trace_end(self, rollout: Any) -> None:
            emit_reward(1.0 if rollout.input == "good" else 0.0)

    good = await store.enqueue_rollout("good")
    bad = await store.enqueue_rollout("bad")
    await Runner(lambda task: None, store=store, hooks=[Judge()]).run(stop_when_idle=True)
    assert (await store.get_rollout(good.rollout_id)).reward == 1.0
    assert (await store.get_rollout(bad.rollout_id)).reward == 0.0


async def test_hooks_base_class_is_optional_and_failing_start_hook_fails_the_attempt(store: MemoryStore) -> None:
    class Strict(Hooks):
        def on_rollout_start(self, rollout: Any) -> None:
            raise RuntimeError("quota exceeded")

    r = await store.enqueue_rollout(1)
    await Runner(lambda task: 1.0, store=store, hooks=Strict()).run(stop_when_idle=True)
    attempt = (await store.query_attempts(r.rollout_id))[0]
    assert attempt.status == AttemptStatus.FAILED and attempt.error is not None
    assert attempt.error.message == "quota exceeded"


# --------------------------------------------------------------------------- stopping
async def test_timeout_stops_an_async_agent(store: MemoryStore) -> None:
    cancelled = asyncio.Event()

    async def slow(task: Any) -> float:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 1.0

    r = await store.enqueue_rollout(1, config=RolloutConfig(timeout_seconds=0.3, max_attempts=1))
    started = time.monotonic()
    stats = await Runner(slow, store=store, heartbeat_interval=0.05).run(stop_when_idle=True)

    assert time.monotonic() - started < 5
    assert cancelled.is_set()
    assert stats.stopped == 1
    attempt = (await store.query_attempts(r.rollout_id))[0]
    assert attempt.status == AttemptStatus.TIMEOUT
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.FAILED


async def test_timeout_stops_a_sync_agent_thread(store: MemoryStore) -> None:
    stopped = threading.Event()
    finished = threading.Event()

    def busy(task: Any) -> float:
        try:
            while True:  # pure-Python loop: the injected exception lands between bytecodes
                time.sleep(0.005)
        except AttemptStopped:
            stopped.set()
            raise
        finally:
            finished.set()

    r = await store.enqueue_rollout(1, config=RolloutConfig(timeout_seconds=0.3, max_attempts=2))
    started = time.monotonic()
    stats = await Runner(busy, store=store, heartbeat_interval=0.05, stop_grace=2.0).run(max_rollouts=1)

    assert time.monotonic() - started < 5
    assert finished.wait(2) and stopped.is_set()
    assert stats.stopped == 1
    attempt = (await store.query_attempts(r.rollout_id))[0]
    assert attempt.status == AttemptStatus.TIMEOUT
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.REQUEUING  # a timeout is retried


async def test_cancelling_the_rollout_stops_its_agent(store: MemoryStore) -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def waits_forever(task: Any) -> None:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    r = await store.enqueue_rollout(1)
    run = asyncio.create_task(Runner(waits_forever, store=store, heartbeat_interval=0.05).run(max_rollouts=1))
    await asyncio.wait_for(entered.wait(), 5)
    await store.cancel_rollout(r.rollout_id)
    stats = await asyncio.wait_for(run, 5)

    assert cancelled.is_set() and stats.stopped == 1
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.CANCELLED
    attempt = (await store.query_attempts(r.rollout_id))[0]
    assert attempt.status == AttemptStatus.FAILED and attempt.error is not None and attempt.error.type == "cancelled"


async def test_an_attempt_superseded_by_another_is_stopped(store: MemoryStore) -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def waits_forever(task: Any) -> None:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    r = await store.enqueue_rollout(1)
    run = asyncio.create_task(Runner(waits_forever, store=store, heartbeat_interval=0.05).run(max_rollouts=1))
    await asyncio.wait_for(entered.wait(), 5)
    [first] = await store.query_attempts(r.rollout_id)
    await store.update_attempt(r.rollout_id, first.attempt_id, status=AttemptStatus.UNRESPONSIVE)
    other = await store.claim_rollout("another-worker")  # the retry starts elsewhere
    assert other is not None
    stats = await asyncio.wait_for(run, 5)

    assert cancelled.is_set() and stats.stopped == 1
    first = await store.get_attempt(r.rollout_id, first.attempt_id)
    assert first.status == AttemptStatus.UNRESPONSIVE  # the stopped attempt reported nothing
    assert (await store.get_rollout(r.rollout_id)).latest_attempt_id == other.attempt.attempt_id


# --------------------------------------------------------------------------- concurrency
async def test_runs_n_async_rollouts_at_once(store: MemoryStore) -> None:
    running = peak = 0

    async def agent(task: Any) -> float:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.2)
        running -= 1
        return 1.0

    for i in range(16):
        await store.enqueue_rollout(i)
    started = time.monotonic()
    stats = await Runner(agent, store=store, concurrency=8).run(stop_when_idle=True)

    assert stats.succeeded == 16
    assert peak == 8
    assert time.monotonic() - started < 1.5  # two waves of 0.2 s, not sixteen


async def test_runs_sync_agents_in_parallel_threads(store: MemoryStore) -> None:
    lock = threading.Lock()
    running = peak = 0
    threads: set[str] = set()

    def agent(task: Any) -> float:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
            threads.add(threading.current_thread().name)
        time.sleep(0.2)
        emit_message(f"task {task}")  # the context follows the agent into its thread
        with lock:
            running -= 1
        return 1.0

    ids = [(await store.enqueue_rollout(i)).rollout_id for i in range(8)]
    stats = await Runner(agent, store=store, concurrency=4).run(stop_when_idle=True)

    assert stats.succeeded == 8 and peak == 4 and len(threads) == 8
    for i, rid in enumerate(ids):
        messages = await spans_named(store, rid, "agentbolt.message")
        assert [m.attributes["agentbolt.message.content"] for m in messages] == [f"task {i}"]


async def test_max_rollouts_limits_the_claims(store: MemoryStore) -> None:
    for i in range(5):
        await store.enqueue_rollout(i)
    stats = await Runner(lambda task: 1.0, store=store, concurrency=2).run(max_rollouts=3)
    assert stats.claimed == 3
    assert (await store.stats()).queue_depth == 2


async def test_attempts_claimed_together_fetch_their_resources_version_once(store: MemoryStore) -> None:
    """Every GRPO publish makes a new resources version; the attempts claimed just after
    it share one fetch of it instead of one each — and a failed fetch is tried again."""
    fetched: list[int] = []
    fail_first = True
    original = store.get_resources

    async def get_resources(version: int | None = None) -> Any:
        nonlocal fail_first
        fetched.append(version or 0)
        await asyncio.sleep(0.05)  # the answer takes a while: the other attempts start meanwhile
        if fail_first:
            fail_first = False
            raise ConnectionError("the store hiccuped")
        return await original(version)

    store.get_resources = get_resources  # type: ignore[method-assign]
    seen: list[str] = []

    async def agent(task: Any, llm: LLM) -> float:
        seen.append(llm.model)
        return 1.0

    await store.add_resources({"llm": LLM(endpoint="http://127.0.0.1:9/v1", model="m1")})
    for i in range(8):
        await store.enqueue_rollout(i, config=RolloutConfig(max_attempts=2))
    stats = await Runner(agent, store=store, concurrency=8).run(stop_when_idle=True)
    # the first fetch, shared by all eight, failed them all (a connection error: retryable); the
    # retries fetched again, once
    assert (stats.claimed, stats.failed, stats.succeeded) == (16, 8, 8)
    assert seen == ["m1"] * 8
    assert fetched == [1, 1]


# --------------------------------------------------------------------------- shutdown
async def test_stop_lets_running_attempts_finish(store: MemoryStore) -> None:
    entered = asyncio.Event()

    async def agent(task: Any) -> float:
        entered.set()
        await asyncio.sleep(0.2)
        return 1.0

    r = await store.enqueue_rollout(1)
    stop = asyncio.Event()
    run = asyncio.create_task(Runner(agent, store=store).run(stop=stop))
    await asyncio.wait_for(entered.wait(), 5)
    stop.set()
    stats = await asyncio.wait_for(run, 5)
    assert stats.succeeded == 1
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.SUCCEEDED


async def test_stop_past_the_grace_hands_attempts_back_for_retry(store: MemoryStore) -> None:
    entered = asyncio.Event()

    async def agent(task: Any) -> float:
        entered.set()
        await asyncio.sleep(30)
        return 1.0

    r = await store.enqueue_rollout(1)
    stop = asyncio.Event()
    run = asyncio.create_task(Runner(agent, store=store, shutdown_grace=0.1).run(stop=stop))
    await asyncio.wait_for(entered.wait(), 5)
    stop.set()
    stats = await asyncio.wait_for(run, 5)

    assert stats.stopped == 1
    attempt = (await store.query_attempts(r.rollout_id))[0]
    assert attempt.status == AttemptStatus.FAILED
    assert attempt.error is not None and attempt.error.type == "RunnerShutdown" and attempt.error.retryable
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.REQUEUING


async def test_cancelling_the_runner_hands_attempts_back_at_once(store: MemoryStore) -> None:
    entered = asyncio.Event()

    def agent(task: Any) -> float:
        entered.set()
        while True:
            time.sleep(0.005)

    r = await store.enqueue_rollout(1)
    run = asyncio.create_task(Runner(agent, store=store).run())
    await asyncio.wait_for(entered.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 5)
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.REQUEUING
    [worker] = await store.query_workers()
    assert worker.status == WorkerStatus.OFFLINE
