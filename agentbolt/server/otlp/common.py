"""What both OTLP encodings share: limits, enum tables, errors, and one decoded span's attribution."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import ValidationError

from agentbolt import semconv
from agentbolt.types import Span, SpanStatus

PROTOBUF_CONTENT_TYPE = "application/x-protobuf"
JSON_CONTENT_TYPE = "application/json"
MAX_VALUE_DEPTH = 30
"""How many array/kvlist levels an attribute value may nest. Protobuf's own parser stops
at 100 message levels, about 31 kvlists deep; this limit sits below it so that both
encodings accept the same values."""

_PROTOBUF_TYPES = frozenset({PROTOBUF_CONTENT_TYPE, "application/protobuf"})
_JSON_TYPES = frozenset({JSON_CONTENT_TYPE})
_SUPPORTED = "application/x-protobuf or application/json, optionally with Content-Encoding: gzip"

_KINDS = ("internal", "internal", "server", "client", "producer", "consumer")
"""Span kind by OTLP enum number (0, unspecified, counts as internal)."""
_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUSES = (SpanStatus.UNSET, SpanStatus.OK, SpanStatus.ERROR)
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8
_INT_RE = re.compile(r"-?[0-9]+")
_HEX_RE = re.compile(r"[0-9a-fA-F]*")


class OtlpDecodeError(ValueError):
    """The request body is not a valid OTLP trace export (answered with HTTP 400)."""


class UnsupportedMediaTypeError(ValueError):
    """The request's Content-Type or Content-Encoding is not supported (HTTP 415)."""



# ---------------------------------------------------------------------------- common mapping
_Fields = dict[str, Any]
"""Span constructor arguments read from one OTLP span (everything but attribution)."""
_Batch = Iterator[tuple[Callable[[], str], _Fields, dict[str, Any]]]
"""(where the span is — built only for error messages —, its fields, its resource)."""


def _to_span(
    where: Callable[[], str],
    fields: _Fields,
    resource: dict[str, Any],
    defaults: tuple[str | None, str | None],
) -> Span:
    attributes = fields["attributes"]
    rollout_id = _attribution(where, semconv.ROLLOUT_ID, attributes, resource, defaults[0])
    attempt_id = _attribution(where, semconv.ATTEMPT_ID, attributes, resource, defaults[1])
    if rollout_id is None or attempt_id is None:
        missing = semconv.ROLLOUT_ID if rollout_id is None else semconv.ATTEMPT_ID
        raise OtlpDecodeError(
            f"{where()}: cannot tell which rollout attempt the span belongs to (no {missing!r}); "
            f"set the {semconv.ROLLOUT_ID!r} and {semconv.ATTEMPT_ID!r} attributes on the span "
            "or its resource, or send it with a rollout-scoped token"
        )
    sequence_id = attributes.get(semconv.SEQUENCE_ID)
    if sequence_id is not None:
        sequence_id = _sequence_id(where, sequence_id)
    try:
        return Span(
            rollout_id=rollout_id,
            attempt_id=attempt_id,
            sequence_id=sequence_id,
            resource=resource,
            **fields,
        )
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise OtlpDecodeError(f"{where()}: invalid span ({problems})") from None


def _attribution(
    where: Callable[[], str], key: str, attributes: dict[str, Any], resource: dict[str, Any], default: str | None
) -> str | None:
    value = attributes.get(key, resource.get(key, default))
    if value is not None and (not isinstance(value, str) or not value):
        raise OtlpDecodeError(f"{where()}: attribute {key!r} must be a non-empty string, got {value!r}")
    return value


def _sequence_id(where: Callable[[], str], value: Any) -> int:
    if isinstance(value, str) and _INT_RE.fullmatch(value):
        value = int(value)
    elif isinstance(value, float) and value.is_integer():  # some SDKs send every number as a double
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise OtlpDecodeError(
            f"{where()}: attribute {semconv.SEQUENCE_ID!r} must be an integer >= 0, got {value!r}"
        )
    return value


def _seconds(nanos: int) -> float:
    return nanos / 1e9


def _add_scope(attributes: dict[str, Any], scope_name: str, scope_version: str) -> None:
    if scope_name:
        attributes.setdefault(semconv.SCOPE_NAME, scope_name)
        if scope_version:
            attributes.setdefault(semconv.SCOPE_VERSION, scope_version)


def _too_deep(where: str) -> OtlpDecodeError:
    return OtlpDecodeError(f"{where}: attribute value nested more than {MAX_VALUE_DEPTH} levels deep")
