"""The parts of v0.3's span model that agentbolt's :class:`~agentbolt.Span` keeps as plain
fields, as v0.3's own types (``agentlightning.types.tracer``), for code that builds or
annotates with them: :class:`TraceStatus`, :class:`SpanContext`, :class:`Event`,
:class:`Link`, :class:`OtelResource`, :class:`SpanCoreFields` and the
:class:`SpanRecordingContext` protocol. A stored span is still agentbolt's ``Span``
(``span.status`` is ``"ok"``/``"error"``/``"unset"``, ``span.resource`` a dict).
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from agentbolt.compat.resolution import module_getattr

__all__ = [  # noqa: F822 - v0.3's names of this module; those defined elsewhere come from __getattr__
    "AttributeValue",
    "Attributes",
    "Event",
    "Link",
    "OtelResource",
    "Span",
    "SpanAttributeNames",
    "SpanContext",
    "SpanCoreFields",
    "SpanLike",
    "SpanNames",
    "SpanRecordingContext",
    "StatusCode",
    "TraceState",
    "TraceStatus",
    "V03StatusCode",
]

TraceState = dict[str, str]
V03StatusCode = Literal["UNSET", "OK", "ERROR"]
"""v0.3's status names (agentbolt's :class:`~agentbolt.types.SpanStatus` is lower-case)."""


class _V03Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class SpanContext(_V03Model):
    """Identifies a span: hex ``trace_id`` (32 digits) and ``span_id`` (16 digits)."""

    trace_id: str
    span_id: str
    is_remote: bool = False
    trace_state: TraceState = {}


class TraceStatus(_V03Model):
    """A span's status: ``"UNSET"``, ``"OK"`` or ``"ERROR"``, with an optional description."""

    status_code: V03StatusCode
    description: str | None = None


AttributeMap = dict[str, object]


class Event(_V03Model):
    """Something that happened during a span (``timestamp`` in seconds)."""

    name: str
    attributes: AttributeMap = {}
    timestamp: float | None = None


class Link(_V03Model):
    """A link from a span to another span."""

    context: SpanContext
    attributes: AttributeMap | None = None


class OtelResource(_V03Model):
    """What produced the spans (``service.name``...)."""

    attributes: AttributeMap = {}
    schema_url: str = ""


class SpanCoreFields(_V03Model):
    """The fields of a span its creator decides: name, status, attributes, times (seconds)."""

    name: str
    status: TraceStatus
    attributes: AttributeMap = {}
    start_time: float | None = None
    end_time: float | None = None


class SpanRecordingContext(Protocol):
    """A handle on a span being recorded (what v0.3 tracers hand to their callers)."""

    def record_exception(self, exception: BaseException) -> None: ...

    def record_attributes(self, attributes: AttributeMap) -> None: ...

    def record_status(self, status_code: V03StatusCode, description: str | None = None) -> None: ...

    def get_recorded_span(self) -> SpanCoreFields: ...


__getattr__ = module_getattr(__name__)  # third-party: v0.3's Span, SpanNames, ... (agentbolt.compat.types)
