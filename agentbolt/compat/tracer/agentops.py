"""``AgentOpsTracer``: v0.3 recorded model calls with AgentOps; agentbolt instruments
openai, LangChain and LiteLLM itself (OpenInference, normalised to ``gen_ai.*``), so this
is the same tracer as :class:`~agentbolt.compat.tracer.otel.OtelTracer`; AgentOps is not needed."""

from agentbolt.compat.tracer.otel import OtelTracer

__all__ = ["AgentOpsTracer"]


class AgentOpsTracer(OtelTracer):
    """Model calls are recorded by agentbolt's auto-instrumentation (no AgentOps)."""
