"""PydanticAI's own OpenTelemetry spans, switched on like an instrumentor.

PydanticAI traces itself (``Agent.instrument_all``): an ``invoke_agent`` span per run
with the agent's name as ``gen_ai.agent.name``, around its model calls. Its OpenInference
package (``openinference-instrumentation-pydantic-ai``) only rewrites those spans for other
backends; agentbolt reads ``gen_ai.agent.name`` as it is. The model calls themselves are
recorded by the ``openai`` client's instrumentor (or the gateway), so PydanticAI's spans
are asked for without message content.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PydanticAIInstrumentor"]


class PydanticAIInstrumentor:
    """``instrument(tracer_provider=...)``: every PydanticAI agent that does not set its own
    instrumentation traces to ``tracer_provider``."""

    def instrument(self, *, tracer_provider: Any, **_: Any) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.models.instrumented import InstrumentationSettings

        Agent.instrument_all(InstrumentationSettings(tracer_provider=tracer_provider, include_content=False))
