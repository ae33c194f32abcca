"""Model-call spans for proxied calls, and the batching writer that stores them.

The gateway writes a call's span straight from its :class:`CallRecord`: the request and
the response it holds as dicts are dumped to JSON once, and the GenAI attributes are
written by :func:`agentbolt.call_attributes.call_attributes`, as for a traced client
call, so adapters treat gateway and traced calls alike. Plus what only the gateway
knows: policy version, engine, replica, latency, HTTP status.

Recording stays off the response path: the proxy hands a :class:`CallRecord` to the
:class:`SpanRecorder`, which builds its span right after the response is on its way and
writes spans in batches in the background, retrying a failed write, and flushes
everything on close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentbolt import semconv
from agentbolt.call_attributes import call_attributes
from agentbolt.gateway.origin import CallOrigin
from agentbolt.store.base import Store
from agentbolt.types import Span, SpanEvent, SpanStatus

__all__ = ["CallRecord", "SpanRecorder", "build_span"]

logger = logging.getLogger("agentbolt.gateway")


@dataclass(slots=True)
class CallRecord:
    """Everything known about one proxied call, cheap to make on the hot path."""

    rollout_id: str
    attempt_id: str
    request: dict[str, Any]
    response: dict[str, Any] | None
    status_code: int
    engine: str
    replica: int
    policy_version: int | None
    start_time: float
    end_time: float
    latency_ms: float
    streamed: bool = False
    retries: int = 0
    error: str | None = None
    span_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    origin: CallOrigin | None = None
    """The agent that made the call and the caller's span (:mod:`.origin`)."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """More span attributes (e.g. how the prompt was built, the Responses API's ids)."""


def build_span(record: CallRecord) -> Span:
    """The model-call span of ``record``: its attributes written once from the record."""
    name, attrs = call_attributes(record.request, record.response, system=record.engine)
    attrs[semconv.SCOPE_NAME] = semconv.GATEWAY_SCOPE
    attrs[semconv.ROLLOUT_ID] = record.rollout_id
    attrs[semconv.ATTEMPT_ID] = record.attempt_id
    attrs[semconv.LLM_ENGINE] = record.engine
    attrs[semconv.LLM_ENGINE_REPLICA] = record.replica
    if record.policy_version is not None:
        attrs[semconv.LLM_POLICY_VERSION] = record.policy_version
    attrs[semconv.LLM_LATENCY_MS] = round(record.latency_ms, 3)
    attrs[semconv.HTTP_STATUS] = record.status_code
    attrs[semconv.LLM_STREAMED] = record.streamed
    if record.retries:
        attrs[semconv.LLM_RETRIES] = record.retries
    attrs.update(record.attributes)
    origin = record.origin or CallOrigin()
    if origin.agent_name:
        attrs[semconv.AGENT_NAME] = origin.agent_name
    events: list[SpanEvent] = []
    status = SpanStatus.OK
    if record.error is not None:
        status = SpanStatus.ERROR
        events.append(
            SpanEvent(
                name=semconv.EXCEPTION_EVENT,
                timestamp=record.end_time,
                attributes={semconv.EXCEPTION_TYPE: "EngineError", semconv.EXCEPTION_MESSAGE: record.error},
            )
        )
    linked = {"trace_id": origin.trace_id, "parent_id": origin.parent_span_id} if origin.trace_id else {}
    return Span(
        rollout_id=record.rollout_id,
        attempt_id=record.attempt_id,
        span_id=record.span_id,
        **linked,
        name=name,
        kind="client",
        status=status,
        status_message=f"EngineError: {record.error}" if record.error is not None else None,
        start_time=record.start_time,
        end_time=record.end_time,
        attributes=attrs,
        events=events,
        resource={semconv.SERVICE_NAME: semconv.GATEWAY_SERVICE},
    )


class SpanRecorder:
    """Writes call records to a store in batches from a background task.

    :meth:`add` never waits. Spans are written once per ``flush_interval`` (sooner when
    ``batch_size`` are pending), those of calls answered during a write with the next
    one. A failed write is retried with backoff (``add_spans`` is idempotent by span id),
    so no span is lost while the store comes back; :meth:`close` writes what is left.

    A record's span is built in the event loop's next turn (after the response it
    records has been written), not when its batch is written: a record holds the
    request and the response as parsed JSON (with logprobs, dozens of small objects or
    more), and kept until its batch was written it outlived two young collections, went
    to the oldest generation and made full collections frequent and long under load.
    """

    def __init__(self, store: Store, *, batch_size: int = 512, flush_interval: float = 0.05) -> None:
        self.store = store
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self._pending: list[Span] = []
        self._unbuilt = 0  # records added whose span is not built yet
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.written = 0

    @property
    def pending(self) -> int:
        return len(self._pending) + self._unbuilt

    def start(self) -> None:
        if self._task is None:
            self._closing = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name="agentbolt-gateway-spans")

    def add(self, record: CallRecord) -> None:
        self._idle.clear()
        self._unbuilt += 1
        try:
            asyncio.get_running_loop().call_soon(self._build, record)
        except RuntimeError:  # no loop running in this thread: build it now
            self._build(record)

    def _build(self, record: CallRecord) -> None:
        self._unbuilt -= 1
        try:
            self._pending.append(build_span(record))
        except Exception:  # a bug, never a passing hiccup: do not retry it forever
            logger.exception("could not build the span of a call of rollout %s; skipped", record.rollout_id)
        if len(self._pending) >= self.batch_size:
            self._wake.set()
        elif not self._pending and not self._unbuilt:
            self._idle.set()

    async def flush(self) -> None:
        """Wait until every record added so far is stored."""
        if self._task is None:
            await self._write_all()
            return
        self._wake.set()
        await self._idle.wait()

    async def close(self) -> None:
        """Write what is pending and stop the background task."""
        self._closing = True
        if self._task is not None:
            self._wake.set()
            task, self._task = self._task, None
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._write_all()

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_interval)
            self._wake.clear()
            await self._write_all(settled=False)

    async def _write_all(self, *, settled: bool = True) -> None:
        """Write the pending spans. ``settled``: until none is pending, those of calls
        answered meanwhile included (a flush, a close); else only those pending now — the
        spans that come during a write wait for the next one, ``flush_interval`` later (or
        a full batch): writing again at once would make one small transaction per store
        round trip, and each costs the writer thread CPU (its GIL with it) and an fsync."""
        delay = 0.05
        left = len(self._pending)
        while self._pending or self._unbuilt:
            if not settled and left <= 0:
                return
            if not self._pending:
                await asyncio.sleep(0)  # the spans of the last records are built in this turn
                continue
            batch = self._pending[: self.batch_size if settled else min(self.batch_size, left)]
            try:
                await self.store.add_spans(batch)
            except Exception:
                if self._closing and delay > 2:
                    logger.exception(
                        "could not store %d gateway span(s) at shutdown; they are lost", len(self._pending)
                    )
                    self._pending.clear()
                    break
                logger.exception("storing %d gateway span(s) failed; retrying in %.2f s", len(batch), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            del self._pending[: len(batch)]
            self.written += len(batch)
            left -= len(batch)
            delay = 0.05
        if not self._pending and not self._unbuilt:
            self._idle.set()
