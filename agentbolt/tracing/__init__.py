"""Tracing: record what an agent does in a rollout — model calls, rewards, messages,
operations — as spans of the rollout's attempt, and ship them to the Store.

* :class:`Tracer` — one per runner; ``with tracer.attempt(rollout, attempt): ...``.
* Emitters — :func:`emit_reward`, :func:`emit_message`, :func:`emit_object`,
  :func:`emit_exception`, :func:`emit_annotation`, :data:`operation`.
* :func:`agent` — name the agent of a block (for selective optimisation).
* Auto-instrumentation of openai, LangChain/LangGraph and LiteLLM (OpenInference),
  normalised to the OpenTelemetry GenAI conventions (:mod:`.genai`).

See ``docs/semantic-conventions.md`` for every span name and attribute.
"""

from agentbolt.tracing.context import (
    AttemptContext,
    NoActiveRolloutError,
    agent,
    current_agent_name,
    current_context,
    require_context,
)
from agentbolt.tracing.emitters import (
    Operation,
    emit_annotation,
    emit_exception,
    emit_message,
    emit_object,
    emit_output,
    emit_reward,
    operation,
)
from agentbolt.tracing.instrumentation import instrument, instrumented_libraries
from agentbolt.tracing.shipper import SpansDroppedError
from agentbolt.tracing.tracer import Tracer

__all__ = [
    "Tracer",
    "AttemptContext",
    "NoActiveRolloutError",
    "SpansDroppedError",
    "current_context",
    "require_context",
    "agent",
    "current_agent_name",
    "emit_reward",
    "emit_message",
    "emit_object",
    "emit_output",
    "emit_exception",
    "emit_annotation",
    "operation",
    "Operation",
    "instrument",
    "instrumented_libraries",
]
