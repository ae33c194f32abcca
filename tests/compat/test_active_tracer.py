"""v0.3's active tracer: one per process; setting another while one is active is refused."""

from __future__ import annotations

import pytest

from agentbolt.compat import DummyTracer, OtelTracer, clear_active_tracer, get_active_tracer, set_active_tracer
from agentbolt.compat.tracer.base import ActiveTracerError


def test_a_second_tracer_is_refused_until_the_first_is_cleared() -> None:
    first, second = OtelTracer(), DummyTracer()
    set_active_tracer(first)
    try:
        with pytest.raises(ActiveTracerError, match="clear_active_tracer"):
            set_active_tracer(second)
        assert get_active_tracer() is first
    finally:
        clear_active_tracer()
    set_active_tracer(second)
    assert get_active_tracer() is second
    clear_active_tracer()
    assert get_active_tracer() is None
