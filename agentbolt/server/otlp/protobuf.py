"""OTLP/protobuf (``application/x-protobuf``) trace exports to span fields."""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from agentbolt.server.otlp.common import (
    _KINDS,
    _SPAN_ID_BYTES,
    _STATUSES,
    _TRACE_ID_BYTES,
    MAX_VALUE_DEPTH,
    OtlpDecodeError,
    _add_scope,
    _Batch,
    _Fields,
    _seconds,
    _too_deep,
)
from agentbolt.types import SpanEvent


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
        resource = _pb_attributes(rs.resource.attributes, functools.partial("resourceSpans[{}].resource".format, ri))
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
                            attributes=_pb_attributes(ev.attributes, functools.partial(_event_path, where, ei)),
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


def _event_path(span_path: Callable[[], str], index: int) -> str:
    return f"{span_path()}.events[{index}]"


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
