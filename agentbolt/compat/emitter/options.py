"""v0.3's emitters with v0.3's signatures: ``emit_message(message, attributes=None,
propagate=True)``, ``emit_object(object, attributes=None, propagate=True)``,
``emit_exception(exception, attributes=None, propagate=True)`` and
``emit_annotation(annotation, propagate=True)``.

Each records the same span as agentbolt's emitter of that name (``agentbolt.message``,
``agentbolt.object``...), with ``attributes`` added (flattened and sanitised as v0.3
does: nested dicts become dotted keys, other values JSON), and returns the span's
:class:`~agentbolt.compat.types.SpanCoreFields` where v0.3 returned them.
``propagate=False`` builds the span without recording it. ``emit_annotation`` keeps the
keys as given — v0.3's tags, links and ``agentlightning.reward.<i>.*`` keys are read by
agentbolt's readers — and, for agentbolt-style calls, still takes keywords.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Mapping
from typing import Any

from opentelemetry.trace import Status, StatusCode

from agentbolt import semconv
from agentbolt.compat.types.tracer import SpanCoreFields, TraceStatus
from agentbolt.compat.utils.otel import check_attributes_sanity, flatten_attributes, sanitize_attributes
from agentbolt.tracing.context import require_context
from agentbolt.tracing.emitters import emit_annotation as bolt_emit_annotation
from agentbolt.tracing.emitters import to_json

__all__ = ["emit_annotation", "emit_exception", "emit_message", "emit_object"]


def _extra(attributes: Mapping[str, Any] | None, emitter: str) -> dict[str, Any]:
    if attributes is None:
        return {}
    if not isinstance(attributes, Mapping):
        raise TypeError(f"{emitter}'s attributes= is a dict of span attributes, got {type(attributes).__name__}")
    return sanitize_attributes(flatten_attributes(dict(attributes)))


def _record(name: str, attributes: dict[str, Any], propagate: bool, error: BaseException | None = None
            ) -> SpanCoreFields:
    if not isinstance(propagate, bool):
        raise TypeError(f"propagate= is True or False, got {propagate!r}")
    start = time.time()
    status = TraceStatus(status_code="ERROR" if error is not None else "OK",
                         description=f"{type(error).__name__}: {error}" if error is not None else None)
    if propagate:
        span = require_context().tracer.otel_tracer.start_span(name, attributes=attributes)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, status.description))
        span.end()
    return SpanCoreFields(name=name, status=status, attributes=attributes, start_time=start, end_time=time.time())


def emit_message(message: str, attributes: Mapping[str, Any] | None = None, propagate: bool = True) -> None:
    """Record a message (a log line of the agent), with extra span attributes."""
    if not isinstance(message, str):
        raise TypeError(f"emit_message takes a string, got {type(message).__name__}")
    attrs = {**_extra(attributes, "emit_message"), semconv.MESSAGE_ROLE: "user", semconv.MESSAGE_CONTENT: message}
    _record(semconv.MESSAGE_SPAN, attrs, propagate)


def emit_object(object: Any, attributes: Mapping[str, Any] | None = None, propagate: bool = True  # noqa: A002
                ) -> SpanCoreFields:
    """Record any object as JSON, with extra span attributes."""
    attrs = {**_extra(attributes, "emit_object"), semconv.OBJECT_NAME: "object",
             semconv.OBJECT_TYPE: type(object).__name__, semconv.OBJECT_JSON: to_json(object)}
    return _record(semconv.OBJECT_SPAN, attrs, propagate)


def emit_exception(exception: BaseException, attributes: Mapping[str, Any] | None = None,
                   propagate: bool = True) -> None:
    """Record an exception (OpenTelemetry's exception attributes and event), with extra
    span attributes."""
    if not isinstance(exception, BaseException):
        raise TypeError(f"emit_exception takes an exception, got {type(exception).__name__}")
    stack = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))
    attrs = {**_extra(attributes, "emit_exception"), semconv.EXCEPTION_TYPE: type(exception).__name__,
             semconv.EXCEPTION_MESSAGE: str(exception), semconv.EXCEPTION_STACKTRACE: stack}
    _record(semconv.EXCEPTION_SPAN, attrs, propagate, error=exception)


def emit_annotation(annotation: Mapping[str, Any] | None = None, propagate: bool = True, **keywords: Any
                    ) -> SpanCoreFields | None:
    """v0.3: ``emit_annotation({"agentlightning.tag.0": "hard"})`` records the keys as given
    (nested dicts flattened). agentbolt: ``emit_annotation(difficulty="hard")`` records
    ``agentbolt.annotation.difficulty`` (see :func:`agentbolt.emit_annotation`)."""
    if annotation is None:
        bolt_emit_annotation(**keywords)
        return None
    if keywords:
        raise TypeError("emit_annotation takes a dict (v0.3) or keywords (agentbolt), not both")
    if not isinstance(annotation, Mapping):
        raise TypeError(f"emit_annotation takes a dict of attributes, got {type(annotation).__name__}")
    flat = flatten_attributes(dict(annotation))
    check_attributes_sanity(flat)
    return _record(semconv.ANNOTATION_SPAN, sanitize_attributes(flat), propagate)
