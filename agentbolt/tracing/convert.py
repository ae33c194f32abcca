"""Turn a finished OpenTelemetry SDK span into an agentbolt :class:`~agentbolt.types.Span`.

Ids become lowercase hex (32 digits for traces, 16 for spans), times float seconds,
kind and status lowercase words, attribute tuples lists. The instrumentation scope,
which :class:`Span` has no field for, is kept as the ``otel.scope.name`` /
``otel.scope.version`` attributes, as the OTLP decoder of the server does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from agentbolt.semconv import SCOPE_NAME, SCOPE_VERSION
from agentbolt.types import Span, SpanEvent, SpanStatus

__all__ = ["to_span", "plain_attributes", "SCOPE_NAME", "SCOPE_VERSION"]

_KINDS = {
    SpanKind.INTERNAL: "internal",
    SpanKind.SERVER: "server",
    SpanKind.CLIENT: "client",
    SpanKind.PRODUCER: "producer",
    SpanKind.CONSUMER: "consumer",
}
_STATUSES = {StatusCode.UNSET: SpanStatus.UNSET, StatusCode.OK: SpanStatus.OK, StatusCode.ERROR: SpanStatus.ERROR}


def plain_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """OTel attributes as a JSON-ready dict (sequences become lists)."""
    if not attributes:
        return {}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()}


def to_span(otel: ReadableSpan, rollout_id: str, attempt_id: str) -> Span:
    """The agentbolt span of a finished OTel span, attributed to one attempt."""
    ctx = otel.context
    parent = otel.parent
    attributes = plain_attributes(otel.attributes)
    scope = otel.instrumentation_scope
    if scope is not None and scope.name:
        attributes.setdefault(SCOPE_NAME, scope.name)
        if scope.version:
            attributes.setdefault(SCOPE_VERSION, scope.version)
    start = (otel.start_time or 0) / 1e9
    end = otel.end_time / 1e9 if otel.end_time is not None else None
    return Span.model_construct(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        sequence_id=None,
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        parent_id=format(parent.span_id, "016x") if parent is not None and parent.is_valid else None,
        name=(otel.name or "span")[:1000],
        kind=_KINDS.get(otel.kind, "internal"),
        status=_STATUSES.get(otel.status.status_code, SpanStatus.UNSET),
        status_message=otel.status.description or None,
        start_time=start,
        end_time=end,
        attributes=attributes,
        events=[
            SpanEvent.model_construct(
                name=e.name, timestamp=e.timestamp / 1e9, attributes=plain_attributes(e.attributes)
            )
            for e in otel.events
        ],
        resource=plain_attributes(otel.resource.attributes) if otel.resource is not None else {},
    )
