"""``agentlightning.tracer`` on agentbolt (see :mod:`.base` for what the tracers do)."""

from agentbolt.compat.tracer.agentops import AgentOpsTracer
from agentbolt.compat.tracer.base import (
    Tracer,
    clear_active_tracer,
    get_active_tracer,
    set_active_tracer,
)
from agentbolt.compat.tracer.dummy import DummyTracer
from agentbolt.compat.tracer.otel import OtelTracer

__all__ = [
    "AgentOpsTracer",
    "DummyTracer",
    "OtelTracer",
    "Tracer",
    "clear_active_tracer",
    "get_active_tracer",
    "set_active_tracer",
]
