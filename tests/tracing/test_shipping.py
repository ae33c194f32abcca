"""Spans reach the store in batches, exactly once, through store hiccups; a dead store
never blocks the agent; flush waits for exactly what it promises."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from agentbolt.store.base import Store
from agentbolt.store.errors import NotFoundError, StoreUnavailableError
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import SpansDroppedError, Tracer, emit_message, emit_reward
from agentbolt.types import Attempt, Span

from .recording import claim, named, stored_spans


class HiccupStore(MemoryStore):
    """A real MemoryStore whose ``add_spans`` fails the first ``failures`` calls, either
    before storing (the request never arrived) or after (the answer was lost)."""

    def __init__(self, failures: int, *, after_storing: bool = False, error: Exception | None = None) -> None:
        super().__init__()
        self.failures = failures
        self.after_storing = after_storing
        self.error = error or StoreUnavailableError("store restarting")
        self.calls: list[int] = []

    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        self.calls.append(len(spans))
        if self.failures > 0:
            self.failures -= 1
            if self.after_storing:
                await super().add_spans(spans)
            raise self.error
        return await super().add_spans(spans)


async def record_some(store: Store, tracer: Tracer, n: int = 3):  # type: ignore[no-untyped-def]
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        for i in range(n):
            emit_message(f"m{i}")
        emit_reward(1.0)
    return c


@pytest.mark.parametrize("after_storing", [False, True], ids=["lost-request", "lost-answer"])
async def test_a_store_that_fails_twice_still_gets_every_span_exactly_once(after_storing: bool) -> None:
    store = HiccupStore(failures=2, after_storing=after_storing, error=ConnectionError("connection reset"))
    async with Tracer(store, auto_instrument=False, flush_interval=0.01, retry_backoff=0.01) as tracer:
        c = await record_some(store, tracer)
        await tracer.flush(c.attempt.attempt_id, timeout=10)
    spans = await stored_spans(store, c)
    assert sorted(s.attributes.get("agentbolt.message.content", s.name) for s in spans) == [
        "agentbolt.reward",
        "agentbolt.rollout",
        "m0",
        "m1",
        "m2",
    ]
    assert len({s.span_id for s in spans}) == len(spans) == 5
    assert len(store.calls) == 3  # two failures, one success, all with the same batch
    assert (await store.get_rollout(c.rollout.rollout_id)).reward == 1.0


async def test_a_dead_store_never_blocks_the_agent_and_flush_reports_the_loss(caplog: pytest.LogCaptureFixture) -> None:
    store = HiccupStore(failures=10**6)
    tracer = Tracer(store, auto_instrument=False, flush_interval=0.01, max_retries=2, retry_backoff=0.01)
    tracer.start()
    t0 = time.perf_counter()
    with caplog.at_level(logging.ERROR, logger="agentbolt.tracing"):
        c = await record_some(store, tracer)
        assert time.perf_counter() - t0 < 0.5  # recording does not wait for the store
        with pytest.raises(SpansDroppedError, match="5 spans of attempt .* could not be stored"):
            await tracer.flush(c.attempt.attempt_id, timeout=10)
    assert len(store.calls) == 3  # the first try and max_retries=2 retries
    assert any("dropping 5 spans" in r.getMessage() for r in caplog.records)
    await tracer.flush(c.attempt.attempt_id)  # the loss is reported once
    await tracer.aclose()


async def test_a_bad_span_target_does_not_sink_the_other_attempts(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    tracer = Tracer(store, auto_instrument=False, flush_interval=60.0)  # one batch, sent by flush
    tracer.start()
    good = await claim(store)
    ghost = good.model_copy(
        update={"attempt": Attempt(attempt_id="at-ghost", rollout_id=good.rollout.rollout_id, sequence_id=9)}
    )
    with caplog.at_level(logging.ERROR, logger="agentbolt.tracing"):
        with tracer.attempt(ghost.rollout, ghost.attempt):
            emit_message("to nowhere")
        with tracer.attempt(good.rollout, good.attempt):
            emit_message("kept")
        with pytest.raises(SpansDroppedError):
            await tracer.flush(ghost.attempt.attempt_id)
        await tracer.flush(good.attempt.attempt_id)
    assert [
        s.attributes["agentbolt.message.content"] for s in named(await stored_spans(store, good), "agentbolt.message")
    ] == ["kept"]
    assert any("NotFoundError" in r.getMessage() for r in caplog.records)
    await tracer.aclose()


async def test_not_found_is_not_retried() -> None:
    store = HiccupStore(failures=1, error=NotFoundError("attempt gone"))
    async with Tracer(store, auto_instrument=False, flush_interval=0.01, retry_backoff=0.01) as tracer:
        c = await record_some(store, tracer, n=1)
        with pytest.raises(SpansDroppedError):
            await tracer.flush(c.attempt.attempt_id)
    assert len(store.calls) == 1


async def test_batches_hold_at_most_max_batch_spans() -> None:
    store = HiccupStore(failures=0)
    async with Tracer(store, auto_instrument=False, max_batch=4, flush_interval=0.05) as tracer:
        c = await record_some(store, tracer, n=10)
        await tracer.flush(c.attempt.attempt_id)
    assert sum(store.calls) == 12
    assert max(store.calls) <= 4
    assert len(await stored_spans(store, c)) == 12


async def test_flush_waits_for_one_attempt_only_and_times_out_on_a_stuck_store() -> None:
    class StuckStore(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.release = asyncio.Event()

        async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
            await self.release.wait()
            return await super().add_spans(spans)

    store = StuckStore()
    tracer = Tracer(store, auto_instrument=False, flush_interval=0.0)
    tracer.start()
    c = await record_some(store, tracer, n=1)
    other = await claim(store)
    await tracer.flush(other.attempt.attempt_id, timeout=0.1)  # nothing of it is waiting
    with pytest.raises(TimeoutError, match="were not stored within 0.1s"):
        await tracer.flush(c.attempt.attempt_id, timeout=0.1)
    store.release.set()
    await tracer.flush(c.attempt.attempt_id, timeout=5)
    assert len(await stored_spans(store, c)) == 3
    await tracer.aclose()


async def test_aclose_stores_what_is_still_queued() -> None:
    store = MemoryStore()
    tracer = Tracer(store, auto_instrument=False, flush_interval=60.0)
    tracer.start()
    c = await record_some(store, tracer, n=2)
    await tracer.aclose()
    assert len(await stored_spans(store, c)) == 4


@contextlib.asynccontextmanager
async def open_backend(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    """A started SQLite store, or an HttpStore talking to a real server over SQLite."""
    from agentbolt.server.testing import serve_in_thread
    from agentbolt.store.http import HttpStore
    from agentbolt.store.sqlite import SqliteStore

    async with contextlib.AsyncExitStack() as stack:
        if backend == "sqlite":
            store: Store = SqliteStore(tmp_path / "store.db")
        else:
            url = stack.enter_context(serve_in_thread(SqliteStore(tmp_path / "server.db"), admin_token="admin"))
            store = HttpStore(url, token="admin")
        await store.start()
        stack.push_async_callback(store.close)
        yield store


@pytest.mark.parametrize("backend", ["sqlite", "http"])
async def test_spans_reach_every_store_backend(backend: str, tmp_path: Path) -> None:
    async with open_backend(backend, tmp_path) as store:
        async with Tracer(store, auto_instrument=False, flush_interval=0.01) as tracer:
            c = await record_some(store, tracer, n=2)
            await tracer.flush(c.attempt.attempt_id)
        spans = await stored_spans(store, c)
        assert sorted(s.name for s in spans) == [
            "agentbolt.message",
            "agentbolt.message",
            "agentbolt.reward",
            "agentbolt.rollout",
        ]
        (root,) = named(spans, "agentbolt.rollout")
        assert all(s.parent_id == root.span_id for s in spans if s is not root)
        assert (await store.get_rollout(c.rollout.rollout_id)).reward == 1.0


def test_a_tracer_started_outside_any_event_loop_ships_from_its_own() -> None:
    store = MemoryStore()
    tracer = Tracer(store, auto_instrument=False, flush_interval=0.01)
    tracer.start()
    c = asyncio.run(claim(store))
    with tracer.attempt(c.rollout, c.attempt):
        emit_reward(0.5)

    async def finish() -> list[Span]:
        await tracer.flush(c.attempt.attempt_id)
        await tracer.aclose()
        return await stored_spans(store, c)

    assert sorted(s.name for s in asyncio.run(finish())) == ["agentbolt.reward", "agentbolt.rollout"]
