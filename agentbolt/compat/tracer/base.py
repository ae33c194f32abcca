"""v0.3's tracers over agentbolt's tracing.

A v0.3 tracer is used three ways, all supported:

* handed to ``LitAgentRunner(tracer)`` or ``Trainer(tracer=...)``: agentbolt's runner
  traces every attempt itself (auto-instrumented openai, LangChain, LiteLLM; emitters;
  spans of the global OpenTelemetry API), so the tracer object only serves
  :meth:`Tracer.get_last_trace` in hooks;
* ``with tracer.lifespan(store): async with tracer.trace_context(name, store=...,
  rollout_id=..., attempt_id=...) as otel_tracer:`` — record a block as the spans of an
  attempt, by hand; ``otel_tracer`` is an OpenTelemetry tracer whose spans are recorded;
* :meth:`Tracer.get_last_trace` — the OpenTelemetry spans of the latest traced attempt
  (so far, when called inside it, e.g. from ``on_trace_end``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from agentbolt import semconv
from agentbolt.compat.store import as_store
from agentbolt.store.base import Store
from agentbolt.tracing.processor import shared_provider
from agentbolt.tracing.tracer import Tracer as BoltTracer

__all__ = ["ActiveTracerError", "Tracer", "clear_active_tracer", "get_active_tracer", "set_active_tracer"]


class _Capture(SpanProcessor):
    """Keeps the OpenTelemetry spans of the attempts some compat tracer watches."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[str, list[ReadableSpan]] = {}

    def watch(self, attempt_id: str) -> list[ReadableSpan]:
        with self._lock:
            return self._watched.setdefault(attempt_id, [])

    def unwatch(self, attempt_id: str) -> None:
        with self._lock:
            self._watched.pop(attempt_id, None)

    def on_end(self, span: ReadableSpan) -> None:
        attempt_id = (span.attributes or {}).get(semconv.ATTEMPT_ID)
        with self._lock:
            bucket = self._watched.get(attempt_id) if isinstance(attempt_id, str) else None
            if bucket is not None:
                bucket.append(span)


_current_trace: ContextVar[list[ReadableSpan] | None] = ContextVar("agentbolt_compat_trace", default=None)
_capture: _Capture | None = None
_capture_lock = threading.Lock()
_closing: set[asyncio.Task[Any]] = set()
"""Close tasks started from a running loop, held until they finish."""


def _captured() -> _Capture:
    global _capture
    with _capture_lock:
        if _capture is None:
            _capture = _Capture()
            shared_provider().add_span_processor(_capture)
            provider = otel_trace.get_tracer_provider()
            if provider is not shared_provider() and hasattr(provider, "add_span_processor"):
                provider.add_span_processor(_capture)  # the application's global provider
        return _capture


class Tracer:
    """v0.3's tracer base (see the module doc); options of v0.3's tracers are accepted."""

    def __init__(self, **_options: Any) -> None:
        self._store: Store | None = None
        self._bolt: BoltTracer | None = None
        self._last: list[ReadableSpan] = []
        self._attempt_id: str | None = None

    # ------------------------------------------------------------------ lifetime
    @contextmanager
    def lifespan(self, store: Any = None) -> Iterator[Tracer]:
        """Set the store traces go to for :meth:`trace_context` (optional: it may name one)."""
        if store is not None:
            self._store = as_store(store)
        try:
            yield self
        finally:
            bolt, self._bolt = self._bolt, None
            if bolt is not None:
                _close_soon(bolt)

    def init(self, *args: Any, **kwargs: Any) -> None:
        """v0.3's set-up hook: nothing to do."""

    def init_worker(self, worker_id: int, store: Any = None) -> None:
        if store is not None:
            self._store = as_store(store)

    def teardown_worker(self, worker_id: int) -> None:
        """v0.3's tear-down hook: nothing to do."""

    def teardown(self) -> None:
        """v0.3's tear-down hook: nothing to do."""

    # ------------------------------------------------------------------ tracing by hand
    @asynccontextmanager
    async def trace_context(self, name: str | None = None, *, store: Any = None, rollout_id: str | None = None,
                            attempt_id: str | None = None) -> AsyncIterator[otel_trace.Tracer]:
        """Record the block as attempt ``attempt_id`` of rollout ``rollout_id``; yields an
        OpenTelemetry tracer whose spans (like emitters' and instrumented calls') are recorded.
        Every span is stored when the block ends."""
        target = as_store(store) if store is not None else self._store
        if target is None or rollout_id is None or attempt_id is None:
            raise ValueError("trace_context needs store=... (or tracer.lifespan(store)), rollout_id and attempt_id")
        if self._bolt is None or self._bolt.store is not target:
            self._bolt = BoltTracer(target)
        rollout = await target.get_rollout(rollout_id)
        attempt = await target.get_attempt(rollout_id, attempt_id)
        self.begin(attempt_id)
        try:
            with self._bolt.attempt(rollout, attempt):
                yield shared_provider().get_tracer(name or "agentbolt.compat")
        finally:
            await self._bolt.flush(attempt_id)
            self.end(attempt_id)

    # ------------------------------------------------------------------ the last trace
    def begin(self, attempt_id: str) -> None:
        """Start keeping the OpenTelemetry spans of ``attempt_id`` (the runner calls this,
        in the attempt's task: concurrent attempts each see their own trace)."""
        self._attempt_id = attempt_id
        self._last = _captured().watch(attempt_id)
        _current_trace.set(self._last)

    def end(self, attempt_id: str) -> None:
        _captured().unwatch(attempt_id)

    def get_last_trace(self) -> list[ReadableSpan]:
        """The OpenTelemetry spans of the attempt being traced (so far) when called inside
        one (a hook), else of the latest attempt traced."""
        current = _current_trace.get()
        return list(current if current is not None else self._last)


def _close_soon(bolt: BoltTracer) -> None:
    """Close a tracer from synchronous code: at once outside a loop, as a task inside one
    (its spans were flushed when each trace ended)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(bolt.aclose())
        return
    _closing.add(task := loop.create_task(bolt.aclose()))  # kept until done: a bare task may be collected
    task.add_done_callback(_closing.discard)


_active: Tracer | None = None


def get_active_tracer() -> Tracer | None:
    return _active


class ActiveTracerError(ValueError):
    """A tracer is already active in this process (v0.3 refuses to replace it)."""


def set_active_tracer(tracer: Tracer) -> None:
    """Make ``tracer`` the process's active tracer; :class:`ActiveTracerError` while another
    is active (call :func:`clear_active_tracer` first), as v0.3 does."""
    global _active
    if _active is not None:
        raise ActiveTracerError(f"a tracer is already active ({type(_active).__name__}): call "
                                "clear_active_tracer() before setting another")
    _active = tracer


def clear_active_tracer() -> None:
    global _active
    _active = None
