"""``OtelTracer``: v0.3's OpenTelemetry tracer (see :mod:`.base`)."""

from agentbolt.compat.tracer.base import Tracer

__all__ = ["OtelTracer"]


class OtelTracer(Tracer):
    """Spans of the OpenTelemetry API (global or the yielded tracer), emitters and
    instrumented libraries, recorded for the attempt being traced."""
