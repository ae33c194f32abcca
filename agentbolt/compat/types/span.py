"""v0.3's :class:`Span`: agentbolt's :class:`~agentbolt.types.Span`, built the v0.3 ways.

It *is* an agentbolt span (stores, adapters and readers take it as one), and it also
accepts what v0.3 code passes: ``status=TraceStatus(status_code="OK")``,
``resource=OtelResource(...)``, ``context``/``parent`` (:class:`SpanContext`), ``links=[]``,
``start_time=None``, and the constructors ``Span.from_attributes(...)``,
``Span.from_core_fields(...)`` and ``Span.from_opentelemetry(...)``. ``rollout_id`` and
``attempt_id`` may be left empty for a span not yet tied to an attempt (a store still
requires them). Fields are read the agentbolt way: ``span.status`` is ``"ok"``/``"error"``,
``span.resource`` a dict.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import Field, model_validator

from agentbolt.compat.semconv import AGL_VIRTUAL
from agentbolt.compat.types.tracer import Event, OtelResource, SpanContext, SpanCoreFields, TraceStatus
from agentbolt.tracing.convert import to_span
from agentbolt.types import Span as BoltSpan
from agentbolt.types import SpanEvent

__all__ = ["Span"]


def _status(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, TraceStatus):
        return value.status_code.lower(), value.description
    if isinstance(value, Mapping) and "status_code" in value:
        return str(value["status_code"]).lower(), value.get("description")
    if isinstance(value, str):
        return value.lower(), None
    return value, None


def _resource(value: Any) -> Any:
    if isinstance(value, OtelResource):
        return dict(value.attributes)
    if isinstance(value, Mapping) and set(value) <= {"attributes", "schema_url"} and "attributes" in value:
        return dict(value["attributes"] or {})
    return value


def _context_ids(value: Any) -> tuple[str | None, str | None]:
    if isinstance(value, SpanContext):
        return value.trace_id, value.span_id
    if isinstance(value, Mapping):
        return value.get("trace_id"), value.get("span_id")
    return None, None


def _event(event: Any) -> Any:
    if isinstance(event, Event):
        return SpanEvent(name=event.name, timestamp=event.timestamp or time.time(), attributes=dict(event.attributes))
    return event  # an agentbolt SpanEvent, or a dict pydantic validates as one


class Span(BoltSpan):
    """An agentbolt span that also takes v0.3's constructor arguments (see the module doc)."""

    rollout_id: str = Field(default="", max_length=200)
    attempt_id: str = Field(default="", max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _from_v03_fields(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        fields = dict(data)
        if "status" in fields:
            fields["status"], description = _status(fields["status"])
            if description is not None and fields.get("status_message") is None:
                fields["status_message"] = description
        if "resource" in fields:
            fields["resource"] = _resource(fields["resource"]) if fields["resource"] is not None else {}
        trace_id, span_id = _context_ids(fields.pop("context", None))
        if trace_id:
            fields.setdefault("trace_id", trace_id)
        if span_id:
            fields.setdefault("span_id", span_id)
        _, parent_span = _context_ids(fields.pop("parent", None))
        if parent_span and fields.get("parent_id") is None:
            fields["parent_id"] = parent_span
        links = fields.pop("links", None)
        if links:
            raise ValueError("agentbolt spans carry no OpenTelemetry links: put them in the attributes "
                             "(agentbolt.compat.utils.otel.make_link_attributes)")
        for key in ("start_time", "sequence_id"):
            if key in fields and fields[key] is None:
                del fields[key]
        if fields.get("events"):
            fields["events"] = [_event(e) for e in fields["events"]]
        return fields

    @classmethod
    def from_attributes(cls, *, attributes: Mapping[str, Any], rollout_id: str | None = None,
                        attempt_id: str | None = None, sequence_id: int | None = None, name: str | None = None,
                        trace_id: str | None = None, span_id: str | None = None, parent_id: str | None = None,
                        start_time: float | None = None, end_time: float | None = None,
                        resource: OtelResource | None = None, status: TraceStatus | None = None) -> Span:
        """A span made of ``attributes``; every other field is optional (ids are generated,
        the name is ``agentlightning.virtual``, the status OK)."""
        fields: dict[str, Any] = {
            "rollout_id": rollout_id or "", "attempt_id": attempt_id or "", "sequence_id": sequence_id or 0,
            "name": name or AGL_VIRTUAL, "parent_id": parent_id, "start_time": start_time, "end_time": end_time,
            "attributes": dict(attributes), "status": status or TraceStatus(status_code="OK"),
            "resource": resource or {},
        }
        if trace_id:
            fields["trace_id"] = trace_id
        if span_id:
            fields["span_id"] = span_id
        return cls(**fields)

    @classmethod
    def from_core_fields(cls, core: SpanCoreFields, *, rollout_id: str | None = None,
                         attempt_id: str | None = None, sequence_id: int | None = None) -> Span:
        """A span of a :class:`SpanCoreFields` (what v0.3's tracers and emitters return)."""
        return cls.from_attributes(attributes=core.attributes, rollout_id=rollout_id, attempt_id=attempt_id,
                                   sequence_id=sequence_id, name=core.name,
                                   start_time=core.start_time or time.time(), end_time=core.end_time,
                                   status=core.status)

    @classmethod
    def from_opentelemetry(cls, src: ReadableSpan, rollout_id: str, attempt_id: str, sequence_id: int) -> Span:
        """An OpenTelemetry span as a span of that attempt (as agentbolt's tracer stores it)."""
        converted = to_span(src, rollout_id, attempt_id)
        return cls(**{**converted.model_dump(), "sequence_id": sequence_id})
