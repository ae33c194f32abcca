"""One process-wide TracerProvider whose spans are routed to the attempt they belong to.

Instrumentations (openai, LangChain, LiteLLM) are switched on once per process and
bound to one TracerProvider — agentbolt's own, never the OpenTelemetry global one. Many
:class:`~agentbolt.tracing.tracer.Tracer` objects and many concurrent rollouts share it:

* the sampler records a span only if it belongs to an attempt, so code outside any
  rollout pays (almost) nothing;
* :class:`AttemptRouter` decides the attempt at ``on_start`` — the parent span's attempt
  if the parent is ours (this survives callbacks that run in other threads), else the
  current :class:`AttemptContext` from the contextvar — and stamps
  ``agentbolt.rollout_id`` / ``agentbolt.attempt_id`` (and the agent name) on the span;
* at ``on_end`` it converts the span, normalises model calls (:mod:`.genai`), and hands
  it to the shipper of the tracer that owns the attempt.

A framework's model-call span (LangChain's ``ChatOpenAI``) that wraps a call recorded by
the client's own instrumentation (openai) is marked ``agentbolt.llm.wrapper`` instead of
being normalised, so each model call is counted once: the client's span, which carries
the exact request, response and token ids, is the model call. A wrapper is recognised by
ancestry, or — since LangChain's spans are siblings of the calls they make — by time: a
client call that started and ended inside a framework model-call span of the same attempt.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import (
    ReadableSpan,
    SpanLimits,
    SpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from agentbolt import semconv
from agentbolt.semconv import AGENT_NAME, LLM_WRAPPED_SPAN_IDS, LLM_WRAPPER
from agentbolt.tracing.context import (
    AttemptContext,
    current_agent_name,
    current_context,
)
from agentbolt.tracing.convert import to_span
from agentbolt.tracing.genai import normalise_model_call, without_payload
from agentbolt.types import Span

__all__ = ["AttemptRouter", "router", "shared_provider", "TRACER_NAME"]

log = logging.getLogger("agentbolt.tracing")

TRACER_NAME = "agentbolt"
_CONTAINMENT_SLACK_NS = 1_000_000
"""Clock slack when deciding that a client call happened inside a framework span (1 ms)."""


class _Record:
    """What the router knows about one live (or recently ended) span of an attempt."""

    __slots__ = ("ctx", "agent", "parent", "inner_calls", "ended")

    def __init__(self, ctx: AttemptContext, agent: str | None, parent: int | None) -> None:
        self.ctx = ctx
        self.agent = agent
        self.parent = parent
        self.inner_calls: list[int] | None = None
        self.ended = False


class _AttemptState:
    __slots__ = ("opened", "span_ids", "client_calls")

    def __init__(self) -> None:
        self.opened = 0
        self.span_ids: set[int] = set()
        self.client_calls: deque[tuple[int, int, int]] = deque(maxlen=1024)
        """(start_ns, end_ns, span_id) of the attempt's recent client-level model calls."""


class AttemptRouter(SpanProcessor):
    """Attributes spans to attempts and delivers them to their tracer (see module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[int, _Record] = {}
        self._attempts: dict[str, _AttemptState] = {}

    # ------------------------------------------------------------------ attempts
    def open_attempt(self, attempt_id: str) -> None:
        with self._lock:
            state = self._attempts.get(attempt_id) or _AttemptState()
            state.opened += 1
            self._attempts[attempt_id] = state

    def close_attempt(self, attempt_id: str) -> None:
        """Forget the attempt's ended spans; spans still running forget themselves later."""
        with self._lock:
            state = self._attempts.get(attempt_id)
            if state is None:
                return
            state.opened -= 1
            if state.opened > 0:
                return
            del self._attempts[attempt_id]
            for sid in state.span_ids:
                rec = self._records.get(sid)
                if rec is not None and rec.ended:
                    del self._records[sid]

    # ------------------------------------------------------------------ attribution
    def attribution(self, parent_context: otel_context.Context | None) -> tuple[AttemptContext, str | None] | None:
        """The attempt (and agent name) a span started now under ``parent_context`` belongs to."""
        parent = trace.get_current_span(parent_context).get_span_context()
        rec = self._records.get(parent.span_id) if parent.is_valid else None
        if rec is not None:
            return rec.ctx, current_agent_name() or rec.agent
        ctx = current_context()
        if ctx is None:
            return None
        return ctx, current_agent_name()

    def knows(self, span_id: int) -> bool:
        """Whether ``span_id`` is a live (or recently ended) span of an attempt."""
        return span_id in self._records

    def agent_of(self, span_id: int) -> str | None:
        """The agent name stamped on the span or its nearest named ancestor."""
        with self._lock:
            rec, seen = self._records.get(span_id), 0
            while rec is not None and seen < 64:
                if rec.agent:
                    return rec.agent
                rec, seen = (self._records.get(rec.parent) if rec.parent is not None else None), seen + 1
        return None

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        try:
            self._start(span, parent_context)
        except Exception:  # noqa: BLE001 — tracing must never break the agent
            log.exception("agentbolt could not attribute span %r", span.name)

    def _start(self, span: SdkSpan, parent_context: otel_context.Context | None) -> None:
        found = self.attribution(parent_context)
        if found is None:
            return
        ctx, agent = found
        span.set_attribute(semconv.ROLLOUT_ID, ctx.rollout.rollout_id)
        span.set_attribute(semconv.ATTEMPT_ID, ctx.attempt.attempt_id)
        if agent:
            span.set_attribute(AGENT_NAME, agent)
        parent = span.parent
        rec = _Record(ctx, agent, parent.span_id if parent is not None and parent.is_valid else None)
        sid = span.get_span_context().span_id
        with self._lock:
            self._records[sid] = rec
            state = self._attempts.get(ctx.attempt.attempt_id)
            if state is not None:
                state.span_ids.add(sid)

    # ------------------------------------------------------------------ delivery
    def on_end(self, span: ReadableSpan) -> None:
        sid = span.context.span_id
        with self._lock:
            rec = self._records.get(sid)
            if rec is None:
                return
            rec.ended = True
            state = self._attempts.get(rec.ctx.attempt.attempt_id)
            if state is None:
                del self._records[sid]
        ctx = rec.ctx
        try:
            out = to_span(span, ctx.rollout.rollout_id, ctx.attempt.attempt_id)
        except Exception:  # noqa: BLE001 — tracing must never break the agent
            log.exception("agentbolt could not convert span %r; it is not recorded", span.name)
            return
        try:
            self._normalise(out, rec, sid, span, state)
        except Exception:  # noqa: BLE001 — keep the span as the instrumentation made it
            log.exception("agentbolt could not normalise model-call span %r; stored as is", span.name)
        if semconv.records_model_call(out.attributes):
            ctx.calls.traced += 1
        ctx.tracer._submit(out)

    def _normalise(self, out: Span, rec: _Record, sid: int, span: ReadableSpan, state: _AttemptState | None) -> None:
        call = normalise_model_call(out.attributes)
        if call is None:
            return
        wrapped = self._wrapped_calls(rec, span, state, raw=call.raw)
        if wrapped:
            out.attributes = without_payload(out.attributes)
            out.attributes[LLM_WRAPPER] = True
            out.attributes[LLM_WRAPPED_SPAN_IDS] = [format(i, "016x") for i in wrapped]
        else:
            out.name, out.attributes, out.kind = call.name, call.attributes, "client"
            self._note_call(rec, sid, span, state, raw=call.raw)

    def _wrapped_calls(self, rec: _Record, span: ReadableSpan, state: _AttemptState | None, *, raw: bool) -> list[int]:
        """Model calls recorded inside this model-call span: by ancestry, or (for a
        framework span) by time."""
        with self._lock:
            inner = list(rec.inner_calls or ())
            if not raw and state is not None and span.start_time is not None and span.end_time is not None:
                lo, hi = span.start_time - _CONTAINMENT_SLACK_NS, span.end_time + _CONTAINMENT_SLACK_NS
                inner.extend(i for start, end, i in state.client_calls if lo <= start and end <= hi and i not in inner)
        return inner

    def _note_call(self, rec: _Record, sid: int, span: ReadableSpan, state: _AttemptState | None, *, raw: bool) -> None:
        """Remember a model call so the spans that wrap it can tell."""
        with self._lock:
            parent = rec.parent
            seen = 0
            while parent is not None and seen < 64:
                up = self._records.get(parent)
                if up is None:
                    break
                if up.inner_calls is None:
                    up.inner_calls = []
                up.inner_calls.append(sid)
                parent, seen = up.parent, seen + 1
            if raw and state is not None and span.start_time is not None and span.end_time is not None:
                state.client_calls.append((span.start_time, span.end_time, sid))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _AttemptSampler(Sampler):
    """Record a span only when it belongs to an attempt (see :meth:`AttemptRouter.attribution`)."""

    def __init__(self, router: AttemptRouter) -> None:
        self._router = router

    def should_sample(
        self,
        parent_context: otel_context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        if self._router.attribution(parent_context) is None:
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "AgentboltAttemptSampler"


router = AttemptRouter()
"""The process-wide router."""

_provider: TracerProvider | None = None
_provider_lock = threading.Lock()


def shared_provider() -> TracerProvider:
    """agentbolt's process-wide TracerProvider (created on first use)."""
    global _provider
    with _provider_lock:
        if _provider is None:
            provider = TracerProvider(
                sampler=_AttemptSampler(router),
                resource=Resource({semconv.SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", "agentbolt")}),
                span_limits=SpanLimits(
                    max_span_attributes=10_000,
                    max_events=1_000,
                    max_event_attributes=1_000,
                ),
            )
            provider.add_span_processor(router)
            _provider = provider
        return _provider
