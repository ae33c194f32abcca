"""The tracer: record what an agent does during a rollout attempt, and store it.

::

    tracer = Tracer(store)
    tracer.start()                      # inside the event loop the store belongs to
    with tracer.attempt(claim.rollout, claim.attempt, resources):
        await agent(task)               # model calls, emit_reward(...), ... are recorded
    await tracer.flush(claim.attempt.attempt_id)
    await tracer.aclose()

Spans are made with the OpenTelemetry SDK on agentbolt's own TracerProvider (shared by
every tracer in the process; spans made through the OpenTelemetry global API inside an
attempt are recorded too, see :mod:`.global_otel`), attributed
to the attempt through contextvars (:mod:`.context`, :mod:`.processor`) and stored in
batches by a :class:`~agentbolt.tracing.shipper.SpanShipper`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from agentbolt.semconv import (
    ATTEMPT_SEQUENCE,
    RESOURCES_VERSION,
    ROLLOUT_MODE,
    ROLLOUT_SPAN,
)
from agentbolt.store.base import Store
from agentbolt.tracing.context import AttemptContext, activate
from agentbolt.tracing.global_otel import record_global_spans
from agentbolt.tracing.processor import TRACER_NAME, router, shared_provider
from agentbolt.tracing.shipper import SpanShipper
from agentbolt.types import Attempt, Resources, Rollout, Span

__all__ = ["Tracer"]


class Tracer:
    """Records the spans of rollout attempts and ships them to ``store``.

    * ``auto_instrument`` — switch on the instrumentation of installed model clients and
      frameworks (openai, LangChain/LangGraph, LiteLLM, OpenAI Agents SDK, AutoGen, CrewAI)
      at :meth:`start`, and the headers that name the agent to the gateway
      (:mod:`.propagation`); once per process.
    * ``max_batch`` — most spans per ``store.add_spans`` call.
    * ``flush_interval`` — how long finished spans may wait to be batched (seconds).
    * ``max_retries`` / ``retry_backoff`` — a batch the store failed to take is sent
      again up to ``max_retries`` times, waiting ``retry_backoff * 2**n`` seconds; then it
      is dropped and logged (never blocking the agent).
    """

    def __init__(
        self,
        store: Store,
        *,
        auto_instrument: bool = True,
        max_batch: int = 512,
        flush_interval: float = 0.2,
        max_retries: int = 5,
        retry_backoff: float = 0.1,
    ) -> None:
        self.store = store
        self.auto_instrument = auto_instrument
        self._shipper = SpanShipper(
            store,
            max_batch=max_batch,
            flush_interval=flush_interval,
            max_retries=max_retries,
            retry_backoff=retry_backoff,
        )
        self.otel_tracer: trace.Tracer = shared_provider().get_tracer(TRACER_NAME)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start shipping spans (on the running event loop, or on a private one when
        called outside any loop), switch on auto-instrumentation and the recording of
        global OpenTelemetry spans (:mod:`.global_otel`). Idempotent."""
        if self.auto_instrument:
            from agentbolt.tracing.instrumentation import instrument
            from agentbolt.tracing.propagation import install as name_agents_at_gateway

            instrument()
            name_agents_at_gateway()
        record_global_spans()
        self._shipper.start()

    async def aclose(self) -> None:
        """Store every finished span (as far as the store lets us), then stop shipping."""
        await self._shipper.aclose()

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ attempts
    @contextmanager
    def attempt(
        self, rollout: Rollout, attempt: Attempt, resources: Resources | None = None, *, token: str | None = None
    ) -> Iterator[AttemptContext]:
        """Run the block as this attempt: every span started inside — by emitters or
        instrumentations, in this task or thread and in tasks and threads spawned with a
        copied context — is recorded for it, under a root span ``agentbolt.rollout``.

        An exception leaving the block is recorded on the root span (status error)
        and re-raised.
        """
        if not self._shipper.started:
            self.start()
        ctx = AttemptContext(
            rollout=rollout, attempt=attempt, resources=resources, store=self.store, tracer=self, token=token
        )
        attrs: dict[str, str | int] = {
            ROLLOUT_MODE: rollout.mode.value,
            ATTEMPT_SEQUENCE: attempt.sequence_id,
        }
        version = attempt.resources_version or rollout.resources_version or (resources.version if resources else None)
        if version is not None:
            attrs[RESOURCES_VERSION] = version
        router.open_attempt(attempt.attempt_id)
        try:
            with activate(ctx):
                # a fresh trace per attempt, whatever span the caller may be in
                root = self.otel_tracer.start_span(ROLLOUT_SPAN, context=otel_context.Context(), attributes=attrs)
                attached = otel_context.attach(trace.set_span_in_context(root))
                try:
                    yield ctx
                except BaseException as exc:
                    root.record_exception(exc)
                    root.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                    raise
                finally:
                    otel_context.detach(attached)
                    root.end()
        finally:
            router.close_attempt(attempt.attempt_id)

    async def flush(self, attempt_id: str | None = None, timeout: float = 30.0) -> None:
        """Wait until every finished span of ``attempt_id`` (or of every attempt) is in the
        store. Raises :class:`~agentbolt.tracing.shipper.SpansDroppedError` (a
        ``StoreUnavailableError``) if some could not be stored, ``TimeoutError`` after
        ``timeout`` seconds."""
        await self._shipper.flush(attempt_id, timeout)

    # ------------------------------------------------------------------ internal
    def _submit(self, span: Span) -> None:
        """Take one finished, attributed span (called by the router, any thread)."""
        self._shipper.submit(span)
