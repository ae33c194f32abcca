"""Ship finished spans to the Store in batches, off the agent's path.

Spans are handed over from any thread (:meth:`SpanShipper.submit` never blocks nor
awaits) and sent by one asyncio task with ``store.add_spans``. The task runs on the
event loop that was running when the shipper started — the loop the store belongs to,
which matters for an ``HttpStore`` whose connections are tied to it — or, when started
outside any loop, on a private loop in a daemon thread.

``add_spans`` is idempotent by span id, so a batch is simply sent again after a store
hiccup (:class:`StoreUnavailableError`, connection errors, 5xx), with exponential backoff,
at most ``max_retries`` times; then it is dropped and logged, so a dead store never
blocks the agent. :meth:`flush` reports dropped spans of the attempt it waited for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence

from agentbolt.store.base import Store
from agentbolt.store.errors import StoreError, StoreUnavailableError
from agentbolt.store.notify import ChangeNotifier
from agentbolt.types import Span

__all__ = ["SpanShipper", "SpansDroppedError"]

log = logging.getLogger("agentbolt.tracing")

_MAX_BACKOFF = 5.0


class SpansDroppedError(StoreUnavailableError):
    """Spans of an attempt could not be stored after every retry: its trace is incomplete."""


class SpanShipper:
    """Batches spans and stores them, retrying idempotently. One per :class:`Tracer`."""

    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = 512,
        flush_interval: float = 0.2,
        max_retries: int = 5,
        retry_backoff: float = 0.1,
        max_queue: int = 200_000,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if flush_interval < 0 or max_retries < 0 or retry_backoff < 0:
            raise ValueError("flush_interval, max_retries and retry_backoff must not be negative")
        self.store = store
        self.max_batch = max_batch
        self.flush_interval = flush_interval
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.max_queue = max_queue
        self._lock = threading.Lock()
        self._queue: list[Span] = []
        self._armed = False
        self._pending: Counter[str] = Counter()
        self._total_pending = 0
        self._dropped: Counter[str] = Counter()
        self._stored = ChangeNotifier()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id: int | None = None
        self._private_thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | concurrent.futures.Future[None] | None = None
        self._wake: asyncio.Event | None = None
        self._urgent: asyncio.Event | None = None
        self._closing = False

    # ------------------------------------------------------------------ lifecycle
    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start the shipping task on the running loop, or on a private one. Idempotent."""
        if self._task is not None:
            return
        self._closing = False
        self._wake, self._urgent = asyncio.Event(), asyncio.Event()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = self._start_private_loop()
            self._task = asyncio.run_coroutine_threadsafe(self._run(), loop)
            return
        self._loop, self._loop_thread_id = loop, threading.get_ident()
        self._task = loop.create_task(self._run(), name="agentbolt-span-shipper")

    def _start_private_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            self._loop_thread_id = threading.get_ident()
            ready.set()
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._private_thread = threading.Thread(target=serve, name="agentbolt-span-shipper", daemon=True)
        self._private_thread.start()
        ready.wait()
        return loop

    async def aclose(self, timeout: float = 30.0) -> None:
        """Store everything queued (as far as the store lets us), then stop."""
        if self._task is None:
            return
        try:
            await self.flush(timeout=timeout)
        except SpansDroppedError:
            pass  # already logged when dropped
        finally:
            self._closing = True
            self._signal(urgent=True)
            task, self._task = self._task, None
            await _finish(task)
            if self._private_thread is not None and self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
                await asyncio.to_thread(self._private_thread.join, 5.0)
                self._private_thread = None
            self._loop = None

    # ------------------------------------------------------------------ submitting
    def submit(self, span: Span) -> None:
        """Queue one finished span (any thread; never blocks)."""
        with self._lock:
            if len(self._queue) >= self.max_queue:
                self._dropped[span.attempt_id] += 1
                full = True
            else:
                full = False
                self._queue.append(span)
                self._pending[span.attempt_id] += 1
                self._total_pending += 1
                wake = not self._armed
                self._armed = True
                urgent = len(self._queue) >= self.max_batch
        if full:
            log.error(
                "agentbolt span queue is full (%d spans waiting for the store): dropping span %r of attempt %s",
                self.max_queue,
                span.name,
                span.attempt_id,
            )
            return
        if wake or urgent:
            self._signal(urgent=urgent)

    def _signal(self, *, urgent: bool) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread_id:
            self._set_events(urgent)
        else:
            try:
                loop.call_soon_threadsafe(self._set_events, urgent)
            except RuntimeError:  # loop closed meanwhile
                pass

    def _set_events(self, urgent: bool) -> None:
        if self._wake is None or self._urgent is None:
            return
        self._wake.set()
        if urgent:
            self._urgent.set()

    # ------------------------------------------------------------------ waiting
    def pending(self, attempt_id: str | None = None) -> int:
        """Spans submitted and neither stored nor dropped yet."""
        with self._lock:
            return self._total_pending if attempt_id is None else self._pending.get(attempt_id, 0)

    async def flush(self, attempt_id: str | None = None, timeout: float = 30.0) -> None:
        """Wait until every span submitted so far (of ``attempt_id``, or all) is stored.

        Raises :class:`SpansDroppedError` if some of them were given up on, and
        :class:`TimeoutError` if the store did not take them within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        if self.pending(attempt_id):
            if self._task is None:
                raise RuntimeError("the tracer is not started: call tracer.start() before flushing spans")
            self._signal(urgent=True)
        while True:
            generation = self._stored.generation
            left = self.pending(attempt_id)
            if left == 0:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"{left} spans{_of(attempt_id)} were not stored within {timeout}s; "
                    "is the store reachable? (raise `timeout` for a slow store)"
                )
            await self._stored.wait(remaining, since_generation=generation)
        with self._lock:
            if attempt_id is None:
                dropped = sum(self._dropped.values())
                self._dropped.clear()
            else:
                dropped = self._dropped.pop(attempt_id, 0)
        if dropped:
            raise SpansDroppedError(
                f"{dropped} spans{_of(attempt_id)} could not be stored and were dropped (see the "
                "agentbolt.tracing log for the store errors): the trace is incomplete"
            )

    # ------------------------------------------------------------------ shipping
    async def _run(self) -> None:
        assert self._wake is not None and self._urgent is not None
        while True:
            await self._wake.wait()
            if not self._urgent.is_set() and not self._closing and self.flush_interval > 0:
                try:
                    await asyncio.wait_for(self._urgent.wait(), self.flush_interval)
                except TimeoutError:
                    pass
            self._wake.clear()
            self._urgent.clear()
            with self._lock:
                batch, self._queue = self._queue, []
                self._armed = False
            for i in range(0, len(batch), self.max_batch):
                await self._ship(batch[i : i + self.max_batch])
            if self._closing and not self.pending():
                return

    async def _ship(self, spans: Sequence[Span], *, split: bool = True) -> None:
        tries = 0
        while True:
            try:
                await self.store.add_spans(spans)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 — every failure is either retried or logged
                if not _retryable(exc):
                    attempts = {s.attempt_id for s in spans}
                    if split and len(attempts) > 1:
                        # one bad target (e.g. an unknown attempt) must not sink the others
                        for aid in sorted(attempts):
                            await self._ship([s for s in spans if s.attempt_id == aid], split=False)
                        return
                    self._give_up(spans, exc, tries)
                    return
                tries += 1
                if tries > self.max_retries:
                    self._give_up(spans, exc, tries - 1)
                    return
                delay = min(_MAX_BACKOFF, self.retry_backoff * 2 ** (tries - 1))
                log.warning(
                    "storing %d spans failed (%s: %s); retry %d/%d in %.2fs",
                    len(spans),
                    type(exc).__name__,
                    exc,
                    tries,
                    self.max_retries,
                    delay,
                )
                await asyncio.sleep(delay)
            else:
                self._done(spans, dropped=False)
                return

    def _give_up(self, spans: Sequence[Span], exc: BaseException, retries: int) -> None:
        attempts = sorted({s.attempt_id for s in spans})
        log.error(
            "dropping %d spans of attempt(s) %s after %d retries: %s: %s",
            len(spans),
            ", ".join(attempts[:5]),
            retries,
            type(exc).__name__,
            exc,
        )
        self._done(spans, dropped=True)

    def _done(self, spans: Sequence[Span], *, dropped: bool) -> None:
        with self._lock:
            for s in spans:
                n = self._pending[s.attempt_id] - 1
                if n > 0:
                    self._pending[s.attempt_id] = n
                else:
                    del self._pending[s.attempt_id]
                if dropped:
                    self._dropped[s.attempt_id] += 1
            self._total_pending -= len(spans)
        self._stored.notify()


def _retryable(exc: BaseException) -> bool:
    """Whether sending the same batch again may succeed: a hiccup, not a bad request.

    Typed store errors say so by their status (503 and other 5xx retry, 4xx do not);
    anything else — connection errors, timeouts, surprises — is retried (bounded)
    rather than losing the spans at once."""
    if isinstance(exc, StoreError):
        return isinstance(exc, StoreUnavailableError) or exc.status_code >= 500
    return True


async def _finish(task: asyncio.Task[None] | concurrent.futures.Future[None]) -> None:
    """Wait (briefly) for the shipping task to end after it was told to close."""
    try:
        if isinstance(task, asyncio.Task):
            if task.get_loop() is not asyncio.get_running_loop():
                task.get_loop().call_soon_threadsafe(task.cancel)
                return
            await asyncio.wait_for(task, 5.0)
        else:
            await asyncio.wait_for(asyncio.wrap_future(task), 5.0)
    except (TimeoutError, asyncio.CancelledError, RuntimeError):
        task.cancel()


def _of(attempt_id: str | None) -> str:
    return f" of attempt {attempt_id}" if attempt_id else ""
