"""``DummyTracer``: a tracer that adds nothing of its own (agentbolt's runner still records
emitters, instrumented calls and the reward)."""

from agentbolt.compat.tracer.base import Tracer

__all__ = ["DummyTracer"]


class DummyTracer(Tracer):
    """No spans beyond what agentbolt's runner records anyway."""
