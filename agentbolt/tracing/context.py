"""Which rollout attempt, and which agent, the code running right now belongs to.

Both live in :mod:`contextvars`, so many rollouts can run at once in one process —
as asyncio tasks, or in threads started with ``asyncio.to_thread`` or
``contextvars.copy_context().run`` — and every span lands in its own rollout. A thread
started with a bare ``threading.Thread`` does not inherit them (that is how Python's
context variables work); start it through ``copy_context().run`` instead.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from agentbolt.types import Attempt, Resources, Rollout, Span

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer as OtelTracer

    from agentbolt.store.base import Store

__all__ = [
    "AttemptContext",
    "CallTally",
    "NoActiveRolloutError",
    "SpanSink",
    "current_context",
    "require_context",
    "agent",
    "current_agent_name",
]


class SpanSink(Protocol):
    """What an attempt's code needs of the tracer that records it
    (:class:`~agentbolt.tracing.tracer.Tracer`; named here so this module, which the
    tracer imports, does not import it back)."""

    otel_tracer: OtelTracer

    def _submit(self, span: Span) -> None: ...

    async def flush(self, attempt_id: str | None = None, timeout: float = 30.0) -> None: ...


@dataclass
class CallTally:
    """The model calls an attempt made that agentbolt saw in this process, as they happen:
    a cheap answer to "did this attempt call a model at all?" before its spans are read.

    ``traced`` counts the model-call spans the tracer recorded (client spans, not a
    framework's wrappers); ``to_gateway`` the HTTP requests sent through ``httpx`` to the
    attempt's gateway URL (``…/rollout/<id>/attempt/<id>/…``, :mod:`.propagation`), each of
    which the gateway records. A call the gateway recorded from any other HTTP client is in
    neither: only the store knows of it."""

    traced: int = 0
    to_gateway: int = 0

    @property
    def any(self) -> bool:
        """Whether a model call of the attempt is known to be recorded."""
        return self.traced > 0 or self.to_gateway > 0


@dataclass(frozen=True)
class AttemptContext:
    """Everything code inside a rollout may need: what runs, with what, and where its
    spans go."""

    rollout: Rollout
    attempt: Attempt
    resources: Resources | None
    store: Store
    tracer: SpanSink
    token: str | None = None
    """The attempt's rollout-scoped token (from ``Claim.token`` over HTTP): what a
    harnessed program gets as its API key for the gateway."""
    calls: CallTally = field(default_factory=CallTally, compare=False)
    """The model calls seen so far (:class:`CallTally`)."""

    @property
    def rollout_id(self) -> str:
        return self.rollout.rollout_id

    @property
    def attempt_id(self) -> str:
        return self.attempt.attempt_id


class NoActiveRolloutError(RuntimeError):
    """An emitter was called outside any rollout, so there is nowhere to record it."""


_ATTEMPT: contextvars.ContextVar[AttemptContext | None] = contextvars.ContextVar("agentbolt_attempt", default=None)
_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("agentbolt_agent", default=None)


def current_context() -> AttemptContext | None:
    """The attempt the calling code runs in, or None outside any rollout."""
    return _ATTEMPT.get()


def require_context() -> AttemptContext:
    """The attempt the calling code runs in; raises :class:`NoActiveRolloutError` if none."""
    ctx = _ATTEMPT.get()
    if ctx is None:
        raise NoActiveRolloutError(
            "no rollout is active here: agentbolt.emit_* records into the current rollout, so call it "
            "from inside an agent run by agentbolt (a @agentbolt.rollout function, a LitAgent, or a "
            "`with tracer.attempt(rollout, attempt):` block). If you started a thread yourself, start it "
            "with asyncio.to_thread(...) or contextvars.copy_context().run(...) so it inherits the rollout."
        )
    return ctx


@contextmanager
def activate(ctx: AttemptContext) -> Iterator[AttemptContext]:
    """Make ``ctx`` the current attempt for the duration of the block (used by the tracer)."""
    token = _ATTEMPT.set(ctx)
    try:
        yield ctx
    finally:
        _ATTEMPT.reset(token)


@contextmanager
def agent(name: str) -> Iterator[None]:
    """Name the agent that runs inside the block.

    Every span started inside carries ``agentbolt.agent.name = name``, which adapters
    match with ``agent_match`` to pick the calls of one agent in a multi-agent system::

        with agentbolt.agent("planner"):
            plan = client.chat.completions.create(...)
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"agent name must be a non-empty string, got {name!r}")
    token = _AGENT.set(name)
    try:
        yield
    finally:
        _AGENT.reset(token)


def current_agent_name() -> str | None:
    """The name set by the innermost enclosing :func:`agent` block, or None."""
    return _AGENT.get()
