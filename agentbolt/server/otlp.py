"""Decode OTLP/HTTP trace exports into agentbolt spans.

Any OpenTelemetry SDK can send its traces to agentbolt: point its OTLP/HTTP exporter at
``<server>/v1/traces``. This module turns the request body — protobuf
(``application/x-protobuf``) or OTLP/JSON (``application/json``), optionally gzip'd —
into :class:`~agentbolt.types.Span` objects, and builds the (empty) success response.

Each span must say which rollout attempt it belongs to: the ``agentbolt.rollout_id`` /
``agentbolt.attempt_id`` span attributes win, then the same keys on the resource, then
the defaults the server derives from a rollout-scoped token. Instrumentation scope name
and version, which :class:`Span` has no field for, are kept as the ``otel.scope.name``
and ``otel.scope.version`` attributes (the OpenTelemetry convention for formats without
scopes). Span links, trace state and dropped-counts are not kept.

Errors: :class:`OtlpDecodeError` (answer 400) says what is wrong and where;
:class:`UnsupportedMediaTypeError` (answer 415) names what is supported.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from pydantic import ValidationError

from agentbolt import semconv
from agentbolt.types import Span, SpanEvent, SpanStatus

__all__ = [
    "OtlpDecodeError",
    "UnsupportedMediaTypeError",
    "decode_otlp_traces",
    "encode_otlp_response",
    "PROTOBUF_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "MAX_VALUE_DEPTH",
]

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


# ---------------------------------------------------------------------------- entry points
def decode_otlp_traces(
    body: bytes,
    content_type: str,
    content_encoding: str | None,
    *,
    default_rollout_id: str | None = None,
    default_attempt_id: str | None = None,
    max_decompressed_bytes: int = 64 * 2**20,
) -> list[Span]:
    """The spans of an OTLP/HTTP ``ExportTraceServiceRequest`` body.

    ``content_type`` and ``content_encoding`` are the request's headers (parameters such
    as ``; charset=utf-8`` are ignored). ``default_rollout_id`` / ``default_attempt_id``
    attribute spans that carry no ``agentbolt.rollout_id`` / ``agentbolt.attempt_id``
    attribute themselves nor on their resource. The body may be at most
    ``max_decompressed_bytes`` once decompressed.
    """
    is_json = _is_json(content_type)
    data = _decompress(body, content_encoding, max_decompressed_bytes)
    batches = _read_json(data) if is_json else _read_protobuf(data)
    defaults = (default_rollout_id, default_attempt_id)
    return [_to_span(where, fields, resource, defaults) for where, fields, resource in batches]


def encode_otlp_response(content_type: str) -> tuple[bytes, str]:
    """An empty (fully successful) ``ExportTraceServiceResponse`` in the request's format,
    with the content type to answer with. ``content_type`` is the request's; one that
    :func:`decode_otlp_traces` would refuse raises :class:`UnsupportedMediaTypeError`."""
    if _is_json(content_type):
        return b"{}", JSON_CONTENT_TYPE
    return ExportTraceServiceResponse().SerializeToString(), PROTOBUF_CONTENT_TYPE


# ---------------------------------------------------------------------------- transport
def _is_json(content_type: str) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in _JSON_TYPES:
        return True
    if media in _PROTOBUF_TYPES:
        return False
    raise UnsupportedMediaTypeError(
        f"unsupported Content-Type {content_type!r} for OTLP traces; send {_SUPPORTED}"
    )


def _decompress(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    encoding = (content_encoding or "identity").strip().lower()
    if encoding == "identity":
        if len(body) > limit:
            raise OtlpDecodeError(f"request body is {len(body)} bytes, more than the limit of {limit}")
        return body
    if encoding not in ("gzip", "x-gzip"):
        raise UnsupportedMediaTypeError(
            f"unsupported Content-Encoding {content_encoding!r} for OTLP traces; send {_SUPPORTED}"
        )
    return _gunzip(body, limit)


def _gunzip(body: bytes, limit: int) -> bytes:
    """Decompress every gzip member of ``body``, never producing more than ``limit`` bytes."""
    out: list[bytes] = []
    size = 0
    rest = body
    try:
        while True:
            z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            chunk = z.decompress(rest, limit - size + 1)
            size += len(chunk)
            if size > limit:
                raise OtlpDecodeError(
                    f"gzip body decompresses to more than the limit of {limit} bytes; send smaller batches"
                )
            out.append(chunk)
            if not z.eof:
                raise OtlpDecodeError("gzip body is truncated")
            rest = z.unused_data
            if not rest.strip(b"\0"):
                return b"".join(out)
    except zlib.error as e:
        raise OtlpDecodeError(f"body is not valid gzip ({e}); drop Content-Encoding: gzip or compress it") from None


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
        attributes.setdefault("otel.scope.name", scope_name)
        if scope_version:
            attributes.setdefault("otel.scope.version", scope_version)


def _too_deep(where: str) -> OtlpDecodeError:
    return OtlpDecodeError(f"{where}: attribute value nested more than {MAX_VALUE_DEPTH} levels deep")


# ---------------------------------------------------------------------------- protobuf
def _read_protobuf(data: bytes) -> _Batch:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(data)
    except (DecodeError, RecursionError) as e:
        raise OtlpDecodeError(
            f"body is not a valid protobuf ExportTraceServiceRequest ({e}); check the Content-Type, "
            "and that values are not nested too deeply"
        ) from None
    return _protobuf_spans(request)


def _protobuf_spans(request: ExportTraceServiceRequest) -> _Batch:
    for ri, rs in enumerate(request.resource_spans):
        resource = _pb_attributes(rs.resource.attributes, lambda ri=ri: f"resourceSpans[{ri}].resource")
        for si, ss in enumerate(rs.scope_spans):
            scope_name, scope_version = ss.scope.name, ss.scope.version
            for pi, sp in enumerate(ss.spans):

                def where(ri: int = ri, si: int = si, pi: int = pi) -> str:
                    return f"resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]"

                attributes = _pb_attributes(sp.attributes, where)
                _add_scope(attributes, scope_name, scope_version)
                kind = sp.kind
                if not 0 <= kind < len(_KINDS):
                    raise OtlpDecodeError(f"{where()}: unknown span kind {kind}")
                code = sp.status.code
                if not 0 <= code < len(_STATUSES):
                    raise OtlpDecodeError(f"{where()}: unknown status code {code}")
                fields: _Fields = {
                    "trace_id": _pb_id(sp.trace_id, _TRACE_ID_BYTES, where, "traceId"),
                    "span_id": _pb_id(sp.span_id, _SPAN_ID_BYTES, where, "spanId"),
                    "parent_id": _pb_id(sp.parent_span_id, _SPAN_ID_BYTES, where, "parentSpanId") or None,
                    "name": sp.name,
                    "kind": _KINDS[kind],
                    "status": _STATUSES[code],
                    "status_message": sp.status.message or None,
                    "start_time": _seconds(sp.start_time_unix_nano),
                    "end_time": _seconds(sp.end_time_unix_nano) if sp.end_time_unix_nano else None,
                    "attributes": attributes,
                    "events": [
                        SpanEvent(
                            name=ev.name,
                            timestamp=_seconds(ev.time_unix_nano),
                            attributes=_pb_attributes(
                                ev.attributes, lambda ei=ei, where=where: f"{where()}.events[{ei}]"
                            ),
                        )
                        for ei, ev in enumerate(sp.events)
                    ],
                }
                yield where, fields, resource


def _pb_id(raw: bytes, size: int, where: Callable[[], str], field: str) -> str:
    if raw and len(raw) != size:
        raise OtlpDecodeError(f"{where()}: {field} must be {size} bytes, got {len(raw)}")
    if not raw and field != "parentSpanId":
        raise OtlpDecodeError(f"{where()}: {field} is empty")
    return raw.hex()


def _pb_attributes(kvs: Any, where: Callable[[], str]) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value, 0, where) for kv in kvs}


def _pb_value(v: AnyValue, depth: int, where: Callable[[], str]) -> Any:
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "double_value":
        return v.double_value
    if which == "bool_value":
        return v.bool_value
    if which is None:
        return None
    if depth >= MAX_VALUE_DEPTH:
        raise _too_deep(where())
    if which == "array_value":
        return [_pb_value(x, depth + 1, where) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value, depth + 1, where) for kv in v.kvlist_value.values}
    return base64.b64encode(v.bytes_value).decode("ascii")  # bytes_value


# ---------------------------------------------------------------------------- OTLP/JSON
def _read_json(data: bytes) -> _Batch:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OtlpDecodeError(f"body is not valid UTF-8 (byte {e.start}); OTLP/JSON must be UTF-8") from None
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise OtlpDecodeError(f"body is not valid JSON ({e})") from None
    return _json_spans(doc)


def _json_spans(doc: Any) -> _Batch:
    for ri, rs in enumerate(_list(_obj(doc, "body").get("resourceSpans"), "resourceSpans")):
        rpath = f"resourceSpans[{ri}]"
        rs = _obj(rs, rpath)
        res = _obj(rs.get("resource"), f"{rpath}.resource")
        resource = _json_attributes(res.get("attributes"), f"{rpath}.resource.attributes")
        for si, ss in enumerate(_list(rs.get("scopeSpans"), f"{rpath}.scopeSpans")):
            spath = f"{rpath}.scopeSpans[{si}]"
            ss = _obj(ss, spath)
            scope = _obj(ss.get("scope"), f"{spath}.scope")
            scope_name = _str(scope.get("name"), f"{spath}.scope.name")
            scope_version = _str(scope.get("version"), f"{spath}.scope.version")
            for pi, sp in enumerate(_list(ss.get("spans"), f"{spath}.spans")):
                path = f"{spath}.spans[{pi}]"
                yield (lambda path=path: path), _json_span(_obj(sp, path), path, scope_name, scope_version), resource


def _json_span(sp: dict[str, Any], path: str, scope_name: str, scope_version: str) -> _Fields:
    attributes = _json_attributes(sp.get("attributes"), f"{path}.attributes")
    _add_scope(attributes, scope_name, scope_version)
    status = _obj(sp.get("status"), f"{path}.status")
    end = _int(sp.get("endTimeUnixNano"), f"{path}.endTimeUnixNano")
    events = []
    for ei, ev in enumerate(_list(sp.get("events"), f"{path}.events")):
        epath = f"{path}.events[{ei}]"
        ev = _obj(ev, epath)
        events.append(
            SpanEvent(
                name=_str(ev.get("name"), f"{epath}.name"),
                timestamp=_seconds(_int(ev.get("timeUnixNano"), f"{epath}.timeUnixNano")),
                attributes=_json_attributes(ev.get("attributes"), f"{epath}.attributes"),
            )
        )
    return {
        "trace_id": _json_id(sp.get("traceId"), _TRACE_ID_BYTES, f"{path}.traceId", required=True),
        "span_id": _json_id(sp.get("spanId"), _SPAN_ID_BYTES, f"{path}.spanId", required=True),
        "parent_id": _json_id(sp.get("parentSpanId"), _SPAN_ID_BYTES, f"{path}.parentSpanId", required=False),
        "name": _str(sp.get("name"), f"{path}.name"),
        "kind": _KINDS[_enum(sp.get("kind"), _KIND_NAMES, len(_KINDS), f"{path}.kind")],
        "status": _STATUSES[_enum(status.get("code"), _STATUS_NAMES, len(_STATUSES), f"{path}.status.code")],
        "status_message": _str(status.get("message"), f"{path}.status.message") or None,
        "start_time": _seconds(_int(sp.get("startTimeUnixNano"), f"{path}.startTimeUnixNano")),
        "end_time": _seconds(end) if end else None,
        "attributes": attributes,
        "events": events,
    }


def _json_id(value: Any, size: int, path: str, *, required: bool) -> str | None:
    """An id given as hex (the OTLP/JSON rule) or base64 (protobuf's generic JSON mapping)."""
    text = _str(value, path)
    if not text:
        if required:
            raise OtlpDecodeError(f"{path} is empty")
        return None
    if len(text) == 2 * size and _HEX_RE.fullmatch(text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise OtlpDecodeError(
            f"{path} must be {size} bytes as {2 * size} hex digits (or base64), got {text[:100]!r}"
        )
    return raw.hex()


def _json_attributes(value: Any, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(_list(value, path)):
        kv = _obj(kv, f"{path}[{i}]")
        out[_str(kv.get("key"), f"{path}[{i}].key")] = _json_value(kv.get("value"), 0, f"{path}[{i}].value")
    return out


def _json_kvlist(value: Any, depth: int, path: str) -> dict[str, Any]:
    """A nested kvlist. Errors inside nested values name the top attribute's path (a
    path through 30 levels would drown the message)."""
    out: dict[str, Any] = {}
    for kv in _list(value, path):
        kv = _obj(kv, path)
        out[_str(kv.get("key"), path)] = _json_value(kv.get("value"), depth, path)
    return out


def _json_value(value: Any, depth: int, path: str) -> Any:
    v = _obj(value, path)
    if "stringValue" in v:
        return _str(v["stringValue"], f"{path}.stringValue")
    if "intValue" in v:
        return _int(v["intValue"], f"{path}.intValue")
    if "doubleValue" in v:
        return _double(v["doubleValue"], f"{path}.doubleValue")
    if "boolValue" in v:
        b = v["boolValue"]
        if not isinstance(b, bool):
            raise OtlpDecodeError(f"{path}.boolValue must be true or false, got {b!r}")
        return b
    if "bytesValue" in v:
        return _bytes(v["bytesValue"], f"{path}.bytesValue")
    if "arrayValue" in v:
        if depth >= MAX_VALUE_DEPTH:
            raise _too_deep(path)
        values = _list(_obj(v["arrayValue"], path).get("values"), path)
        return [_json_value(x, depth + 1, path) for x in values]
    if "kvlistValue" in v:
        if depth >= MAX_VALUE_DEPTH:
            raise _too_deep(path)
        return _json_kvlist(_obj(v["kvlistValue"], path).get("values"), depth + 1, path)
    return None  # an empty AnyValue


def _obj(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OtlpDecodeError(f"{path} must be a JSON object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{path} must be a JSON array, got {type(value).__name__}")
    return value


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OtlpDecodeError(f"{path} must be a string, got {type(value).__name__}")
    return value


def _int(value: Any, path: str) -> int:
    """An int64 field: a JSON number or, as protobuf's JSON mapping writes them, a string."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
        return int(value)
    raise OtlpDecodeError(f"{path} must be an integer (a number or a decimal string), got {value!r}")


def _double(value: Any, path: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(number) or value in ("NaN", "Infinity", "-Infinity"):
                return number
    raise OtlpDecodeError(f"{path} must be a number, got {value!r}")


def _bytes(value: Any, path: str) -> str:
    """Bytes arrive base64-encoded (standard or URL-safe); keep them as standard base64."""
    text = _str(value, path)
    try:
        raw = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise OtlpDecodeError(f"{path} must be base64, got {text[:100]!r}") from None
    return base64.b64encode(raw).decode("ascii")


def _enum(value: Any, names: dict[str, int], count: int, path: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and value in names:
        return names[value]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count:
        return value
    raise OtlpDecodeError(f"{path} must be one of {sorted(names)} or 0..{count - 1}, got {value!r}")
