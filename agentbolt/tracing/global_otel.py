"""Record spans made through the global OpenTelemetry API inside a rollout.

Agents (and libraries) often trace with ``opentelemetry.trace.get_tracer(...)``: the
global provider, not agentbolt's. :func:`record_global_spans`, called when a
:class:`~agentbolt.tracing.Tracer` starts, makes those spans part of the attempt they
were started in:

* no global provider set yet (OpenTelemetry's default proxy): agentbolt's own provider
  becomes the global one. Spans started outside any rollout are dropped by its sampler,
  so the rest of the program pays (almost) nothing. A program that wants its own global
  provider sets it before starting agentbolt, or sets ``AGENTBOLT_GLOBAL_OTEL=0``;
* a global SDK ``TracerProvider`` already set (the application's own): agentbolt's
  router is added to it as one more span processor; the application's exporters keep
  receiving every span as before.

``AGENTBOLT_GLOBAL_OTEL=0`` leaves the global provider alone (only agentbolt's own
tracer and the instrumented libraries are recorded then).
"""

from __future__ import annotations

import logging
import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from agentbolt.tracing.processor import router, shared_provider

__all__ = ["ENV_SWITCH", "record_global_spans"]

log = logging.getLogger("agentbolt.tracing")

ENV_SWITCH = "AGENTBOLT_GLOBAL_OTEL"
"""Set to ``0`` to leave the OpenTelemetry global tracer provider alone."""

_lock = threading.Lock()
_joined: set[int] = set()


def record_global_spans() -> bool:
    """Route spans of the global OpenTelemetry provider started inside an attempt to the
    attempt. Idempotent; returns whether global spans are recorded."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    ours = shared_provider()
    with _lock:
        current = trace.get_tracer_provider()
        if current is ours or id(current) in _joined:
            return True
        if isinstance(current, TracerProvider):
            current.add_span_processor(router)
            _joined.add(id(current))
            log.debug("agentbolt records rollout spans of the application's global tracer provider")
            return True
        if isinstance(current, trace.ProxyTracerProvider):
            trace.set_tracer_provider(ours)
            return trace.get_tracer_provider() is ours
        log.info(
            "the global OpenTelemetry tracer provider is a %s, not an SDK TracerProvider: spans made through it "
            "are not recorded by agentbolt",
            type(current).__name__,
        )
        return False
