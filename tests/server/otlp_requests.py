"""Builders of OTLP requests for the ingestion tests: real SDK spans, hand-written
OTLP/JSON, raw protobuf fields for what the SDK cannot produce."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentbolt import semconv
from agentbolt.types import Span

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
ATTRIBUTED = {semconv.ROLLOUT_ID: "ro-1", semconv.ATTEMPT_ID: "at-1"}



# ---------------------------------------------------------------------------- helpers
def record(resource: dict[str, Any] | None = None, *, scope: str = "my.agent") -> tuple[Any, InMemorySpanExporter]:
    """A real SDK tracer whose finished spans land in an in-memory exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource if resource is not None else ATTRIBUTED))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer(scope, "1.2.3"), exporter


def agent_spans() -> Sequence[ReadableSpan]:
    """A small agent trace: a server span with a client child carrying every kind of
    attribute value, events and an error status."""
    tracer, exporter = record({**ATTRIBUTED, "service.name": "my-agent", "deployment.tier": 3})
    with tracer.start_as_current_span("agent.run", kind=SpanKind.SERVER, attributes={"task": "t-7"}):
        with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT) as child:
            child.set_attributes(
                {
                    "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 12,
                    "gen_ai.request.temperature": 0.7,
                    "streaming": False,
                    "token_ids": [1, 2, 3],
                    "logprobs": [-0.5, -1.25],
                    "stop": ["\n", "END"],
                    "flags": [True, False],
                }
            )
            child.add_event("first token", {"latency_ms": 31, "note": "fast"})
            child.add_event("done")
            child.set_status(Status(StatusCode.ERROR, "rate limited"))
    return exporter.get_finished_spans()


def protobuf_body(spans: Sequence[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def any_value_json(value: Any) -> dict[str, Any]:
    """OTLP/JSON AnyValue, written by hand per the OTLP specification."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 → decimal string
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value_json(v) for v in value]}}
    raise TypeError(value)


def attributes_json(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value_json(v)} for k, v in attributes.items()]


def otlp_json_body(spans: Sequence[ReadableSpan]) -> bytes:
    """The OTLP/JSON encoding of SDK spans, written from the spec: hex ids, int64 as
    strings, enums as integers, camelCase keys. All spans share one resource and scope."""
    first = spans[0]
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": attributes_json(first.resource.attributes)},
                "scopeSpans": [
                    {
                        "scope": {
                            "name": first.instrumentation_scope.name,
                            "version": first.instrumentation_scope.version,
                        },
                        "spans": [
                            {
                                "traceId": format(s.context.trace_id, "032x"),
                                "spanId": format(s.context.span_id, "016x"),
                                "parentSpanId": format(s.parent.span_id, "016x") if s.parent else "",
                                "name": s.name,
                                "kind": s.kind.value + 1,  # SDK SpanKind.INTERNAL is 0, OTLP's is 1
                                "startTimeUnixNano": str(s.start_time),
                                "endTimeUnixNano": str(s.end_time),
                                "attributes": attributes_json(s.attributes),
                                "events": [
                                    {
                                        "timeUnixNano": str(e.timestamp),
                                        "name": e.name,
                                        "attributes": attributes_json(e.attributes),
                                    }
                                    for e in s.events
                                ],
                                "status": {"code": s.status.status_code.value, "message": s.status.description or ""},
                            }
                            for s in spans
                        ],
                    }
                ],
            }
        ]
    }
    return json.dumps(doc).encode()


def span_request(*, attributes: dict[str, Any] | None = None, resource: dict[str, Any] | None = None) -> bytes:
    """A one-span protobuf request with the given span and resource attributes."""
    tracer, exporter = record(resource or {})
    with tracer.start_as_current_span("step", attributes=attributes or {}):
        pass
    return protobuf_body(exporter.get_finished_spans())


def by_name(spans: list[Span]) -> dict[str, Span]:
    return {s.name: s for s in spans}


def proto_field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field, encoded by hand."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def request_with_attribute(key: str, value_bytes: bytes) -> bytes:
    """A protobuf request with one attributed span whose attribute ``key`` holds the
    already-serialized AnyValue ``value_bytes`` (which the protobuf library may refuse to
    build itself, e.g. when nested thousands deep)."""
    span = PbSpan(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="deep")
    for k, v in ATTRIBUTED.items():
        span.attributes.add(key=k, value=AnyValue(string_value=v))
    span_bytes = span.SerializeToString() + proto_field(9, proto_field(1, key.encode()) + proto_field(2, value_bytes))
    return proto_field(1, proto_field(2, proto_field(2, span_bytes)))  # request → resourceSpans → scopeSpans → span


def nested_kvlist_protobuf(depth: int) -> bytes:
    """An AnyValue that is ``depth`` kvlists inside each other, built from the inside out
    without recursion."""
    value = AnyValue(string_value="bottom").SerializeToString()
    headers: list[bytes] = []
    size = len(value)
    for _ in range(depth):
        key_value = proto_field(1, b"k")
        kv_header = key_value + _varint(2 << 3 | 2) + _varint(size)  # KeyValue{key, value=...}
        kv_size = len(kv_header) + size
        list_header = _varint(1 << 3 | 2) + _varint(kv_size)  # KeyValueList{values=[...]}
        list_size = len(list_header) + kv_size
        any_header = _varint(6 << 3 | 2) + _varint(list_size)  # AnyValue{kvlist_value=...}
        headers.append(any_header + list_header + kv_header)
        size = len(headers[-1]) + size
    return b"".join(reversed(headers)) + value


def nested_array_json(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


def json_request(attributes: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "0af7651916cd43dd8448eb211c80319c",
                                    "spanId": "b7ad6b7169203331",
                                    "name": "x",
                                    "attributes": attributes_json(ATTRIBUTED) + attributes,
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    ).encode()


