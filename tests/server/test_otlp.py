"""OTLP/HTTP trace ingestion: what the OpenTelemetry SDK sends becomes agentbolt spans.

Requests are produced by the real OpenTelemetry SDK and its OTLP span encoder, so these
tests check the decoder against what exporters in the wild send.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentbolt import semconv
from agentbolt.server.otlp import (
    MAX_VALUE_DEPTH,
    OtlpDecodeError,
    UnsupportedMediaTypeError,
    decode_otlp_traces,
    encode_otlp_response,
)
from agentbolt.types import Span, SpanStatus

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


# ---------------------------------------------------------------------------- protobuf
def test_protobuf_from_the_sdk_maps_every_field() -> None:
    sdk = {s.name: s for s in agent_spans()}
    spans = by_name(decode_otlp_traces(protobuf_body(list(sdk.values())), PROTOBUF, None))

    assert set(spans) == {"agent.run", "chat gpt-4o"}
    parent, child = spans["agent.run"], spans["chat gpt-4o"]
    sdk_child = sdk["chat gpt-4o"]

    assert child.rollout_id == "ro-1" and child.attempt_id == "at-1"
    assert child.sequence_id is None
    assert child.trace_id == format(sdk_child.context.trace_id, "032x")
    assert child.span_id == format(sdk_child.context.span_id, "016x")
    assert child.trace_id == parent.trace_id and len(child.trace_id) == 32
    assert child.parent_id == parent.span_id
    assert parent.parent_id is None
    assert (parent.kind, child.kind) == ("server", "client")
    assert child.status is SpanStatus.ERROR and child.status_message == "rate limited"
    assert parent.status is SpanStatus.UNSET and parent.status_message is None
    assert child.start_time == sdk_child.start_time / 1e9
    assert child.end_time == sdk_child.end_time / 1e9
    assert child.attributes == {
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.request.temperature": 0.7,
        "streaming": False,
        "token_ids": [1, 2, 3],
        "logprobs": [-0.5, -1.25],
        "stop": ["\n", "END"],
        "flags": [True, False],
        "otel.scope.name": "my.agent",
        "otel.scope.version": "1.2.3",
    }
    assert parent.attributes["task"] == "t-7"
    assert [(e.name, e.attributes) for e in child.events] == [
        ("first token", {"latency_ms": 31, "note": "fast"}),
        ("done", {}),
    ]
    assert child.events[0].timestamp == sdk_child.events[0].timestamp / 1e9
    assert child.resource["service.name"] == "my-agent"
    assert child.resource["deployment.tier"] == 3
    assert child.resource[semconv.ROLLOUT_ID] == "ro-1"  # attribution keys are kept as provenance
    assert child.resource["telemetry.sdk.language"] == "python"


def test_protobuf_value_types_the_sdk_cannot_produce() -> None:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=bytes(range(16)), span_id=bytes(range(8)), name="raw", kind=PbSpan.SPAN_KIND_CONSUMER,
        start_time_unix_nano=1_700_000_000_500_000_000,
    )
    for k, v in ATTRIBUTED.items():
        span.attributes.add(key=k, value=AnyValue(string_value=v))
    span.attributes.add(key="blob", value=AnyValue(bytes_value=b"\x00\xffhi"))
    kv = span.attributes.add(key="obj").value.kvlist_value
    kv.values.add(key="n", value=AnyValue(int_value=-5))
    kv.values.add(key="inner").value.array_value.values.add(string_value="a")
    span.attributes.add(key="empty")  # an AnyValue with nothing set

    (out,) = decode_otlp_traces(request.SerializeToString(), PROTOBUF, None)

    assert out.trace_id == "000102030405060708090a0b0c0d0e0f" and out.span_id == "0001020304050607"
    assert out.kind == "consumer"
    assert out.start_time == 1_700_000_000.5 and out.end_time is None
    assert out.attributes["blob"] == base64.b64encode(b"\x00\xffhi").decode()
    assert out.attributes["obj"] == {"n": -5, "inner": ["a"]}
    assert out.attributes["empty"] is None
    assert out.resource == {}


def test_gzip_body_decodes_like_the_plain_one() -> None:
    body = protobuf_body(agent_spans())
    plain = decode_otlp_traces(body, PROTOBUF, None)
    assert decode_otlp_traces(gzip.compress(body), PROTOBUF, "gzip") == plain
    assert decode_otlp_traces(body, PROTOBUF, "identity") == plain
    # Concatenated gzip members are one valid gzip stream.
    half = len(body) // 2
    assert decode_otlp_traces(gzip.compress(body[:half]) + gzip.compress(body[half:]), PROTOBUF, "GZIP") == plain


def test_content_type_parameters_are_ignored() -> None:
    body = protobuf_body(agent_spans())
    assert len(decode_otlp_traces(body, "Application/X-Protobuf; charset=binary", None)) == 2


def test_a_thousand_span_request_decodes_fast() -> None:
    tracer, exporter = record()
    for i in range(1000):
        with tracer.start_as_current_span(f"call {i}", attributes={"i": i, "model": "m", "ok": True}) as s:
            s.add_event("tick", {"n": i})
    body = protobuf_body(exporter.get_finished_spans())

    best = float("inf")
    for _ in range(3):  # best of three, so a busy shared machine does not fail the test
        start = time.perf_counter()
        spans = decode_otlp_traces(body, PROTOBUF, None)
        best = min(best, time.perf_counter() - start)

    assert len(spans) == 1000
    assert best < 0.25, f"decoding 1,000 spans took {best * 1000:.0f} ms"


# ---------------------------------------------------------------------------- OTLP/JSON
def test_otlp_json_written_per_the_spec_matches_protobuf() -> None:
    sdk = agent_spans()
    from_json = decode_otlp_traces(otlp_json_body(sdk), JSON, None)
    assert from_json == decode_otlp_traces(protobuf_body(sdk), PROTOBUF, None)
    assert by_name(from_json)["chat gpt-4o"].attributes["token_ids"] == [1, 2, 3]


def test_protobuf_generic_json_mapping_with_base64_ids_matches_protobuf() -> None:
    request = encode_spans(agent_spans())
    text = json_format.MessageToJson(request)
    assert '"SPAN_KIND_CLIENT"' in text and '"STATUS_CODE_ERROR"' in text  # enums by name
    assert json.loads(text)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"].endswith("==")  # base64 ids

    assert decode_otlp_traces(text.encode(), JSON, None) == decode_otlp_traces(
        request.SerializeToString(), PROTOBUF, None
    )


def test_otlp_json_value_variants() -> None:
    body = json_request(
        [
            {"key": "int_as_number", "value": {"intValue": 42}},
            {"key": "int_as_string", "value": {"intValue": "-9007199254740993"}},
            {"key": "double_as_string", "value": {"doubleValue": "2.5"}},
            {"key": "infinity", "value": {"doubleValue": "Infinity"}},
            {"key": "bytes", "value": {"bytesValue": base64.b64encode(b"\x00\x01").decode()}},
            {"key": "kv", "value": {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}}},
            {"key": "empty_array", "value": {"arrayValue": {}}},
            {"key": "unset", "value": {}},
            {"key": semconv.SEQUENCE_ID, "value": {"intValue": "7"}},
        ]
    )
    (span,) = decode_otlp_traces(body, "application/json; charset=utf-8", None)

    assert span.attributes["int_as_number"] == 42
    assert span.attributes["int_as_string"] == -9007199254740993
    assert span.attributes["double_as_string"] == 2.5
    assert span.attributes["infinity"] == float("inf")
    assert span.attributes["bytes"] == "AAE="
    assert span.attributes["kv"] == {"a": True}
    assert span.attributes["empty_array"] == []
    assert span.attributes["unset"] is None
    assert span.sequence_id == 7
    assert span.trace_id == "0af7651916cd43dd8448eb211c80319c" and span.parent_id is None
    assert span.kind == "internal" and span.status is SpanStatus.UNSET  # defaults when omitted
    assert span.start_time == 0.0 and span.end_time is None


def test_otlp_json_uppercase_hex_ids_are_lowercased() -> None:
    doc = json.loads(json_request([]))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "0AF7651916CD43DD8448EB211C80319C"
    (span,) = decode_otlp_traces(json.dumps(doc).encode(), JSON, None)
    assert span.trace_id == "0af7651916cd43dd8448eb211c80319c"


def test_empty_request_has_no_spans() -> None:
    assert decode_otlp_traces(b"", PROTOBUF, None) == []
    assert decode_otlp_traces(b"{}", JSON, None) == []


# ---------------------------------------------------------------------------- attribution
def test_attribution_from_span_attributes_wins() -> None:
    body = span_request(
        attributes={semconv.ROLLOUT_ID: "ro-span", semconv.ATTEMPT_ID: "at-span", semconv.SEQUENCE_ID: 4},
        resource={semconv.ROLLOUT_ID: "ro-res", semconv.ATTEMPT_ID: "at-res"},
    )
    (span,) = decode_otlp_traces(body, PROTOBUF, None, default_rollout_id="ro-def", default_attempt_id="at-def")
    assert (span.rollout_id, span.attempt_id, span.sequence_id) == ("ro-span", "at-span", 4)
    assert span.attributes[semconv.ROLLOUT_ID] == "ro-span"  # kept: shows where the span came from


def test_attribution_from_resource_attributes() -> None:
    body = span_request(resource={semconv.ROLLOUT_ID: "ro-res", semconv.ATTEMPT_ID: "at-res"})
    (span,) = decode_otlp_traces(body, PROTOBUF, None, default_rollout_id="ro-def", default_attempt_id="at-def")
    assert (span.rollout_id, span.attempt_id) == ("ro-res", "at-res")


def test_attribution_from_defaults() -> None:
    body = span_request()
    (span,) = decode_otlp_traces(body, PROTOBUF, None, default_rollout_id="ro-def", default_attempt_id="at-def")
    assert (span.rollout_id, span.attempt_id) == ("ro-def", "at-def")


def test_unattributed_span_is_rejected_with_a_hint() -> None:
    with pytest.raises(OtlpDecodeError) as err:
        decode_otlp_traces(span_request(), PROTOBUF, None)
    message = str(err.value)
    assert "resourceSpans[0].scopeSpans[0].spans[0]" in message
    assert semconv.ROLLOUT_ID in message and semconv.ATTEMPT_ID in message
    assert "rollout-scoped token" in message


def test_sequence_id_sent_as_a_whole_double_is_accepted() -> None:
    body = json_request([{"key": semconv.SEQUENCE_ID, "value": {"doubleValue": 3.0}}])
    (span,) = decode_otlp_traces(body, JSON, None)
    assert span.sequence_id == 3


def test_half_attributed_span_is_rejected() -> None:
    with pytest.raises(OtlpDecodeError, match=semconv.ATTEMPT_ID):
        decode_otlp_traces(span_request(attributes={semconv.ROLLOUT_ID: "ro-1"}), PROTOBUF, None)


@pytest.mark.parametrize(
    ("attributes", "problem"),
    [
        ({**ATTRIBUTED, semconv.ROLLOUT_ID: 5}, "must be a non-empty string"),
        ({**ATTRIBUTED, semconv.SEQUENCE_ID: -1}, "must be an integer >= 0"),
        ({**ATTRIBUTED, semconv.SEQUENCE_ID: "first"}, "must be an integer >= 0"),
    ],
)
def test_malformed_attribution_is_rejected(attributes: dict[str, Any], problem: str) -> None:
    with pytest.raises(OtlpDecodeError, match=problem):
        decode_otlp_traces(span_request(attributes=attributes), PROTOBUF, None)


# ---------------------------------------------------------------------------- bad requests
def test_garbage_protobuf_is_a_decode_error() -> None:
    with pytest.raises(OtlpDecodeError, match="not a valid protobuf ExportTraceServiceRequest"):
        decode_otlp_traces(b"\x0a\x05abc", PROTOBUF, None)  # a field longer than the body
    with pytest.raises(OtlpDecodeError, match="not a valid protobuf"):
        decode_otlp_traces(b'{"resourceSpans": []}', PROTOBUF, None)  # JSON sent as protobuf


def test_invalid_json_is_a_decode_error() -> None:
    with pytest.raises(OtlpDecodeError, match="not valid JSON"):
        decode_otlp_traces(b'{"resourceSpans": [', JSON, None)
    with pytest.raises(OtlpDecodeError, match=r"resourceSpans\[0\]\.scopeSpans must be a JSON array"):
        decode_otlp_traces(b'{"resourceSpans": [{"scopeSpans": 3}]}', JSON, None)


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(OtlpDecodeError, match="not valid UTF-8"):
        decode_otlp_traces(b'{"resourceSpans": [], "x": "\xff\xfe"}', JSON, None)
    request = request_with_attribute("k", AnyValue(string_value="v").SerializeToString())
    bad_name = request.replace(b"deep", b"\xff\xfe\xfd\xfc")  # the span name, same length
    with pytest.raises(OtlpDecodeError, match="UTF-8"):
        decode_otlp_traces(bad_name, PROTOBUF, None)


@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH + 8, 10_000])
def test_deeply_nested_kvlist_protobuf_is_a_clean_decode_error(depth: int) -> None:
    body = request_with_attribute("deep", nested_kvlist_protobuf(depth))
    with pytest.raises(OtlpDecodeError):
        decode_otlp_traces(body, PROTOBUF, None)


def test_nesting_up_to_the_limit_is_accepted_in_both_encodings() -> None:
    value = {"stringValue": "bottom"}
    for _ in range(MAX_VALUE_DEPTH):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    (from_json,) = decode_otlp_traces(json_request([{"key": "deep", "value": value}]), JSON, None)
    (from_protobuf,) = decode_otlp_traces(
        request_with_attribute("deep", nested_kvlist_protobuf(MAX_VALUE_DEPTH)), PROTOBUF, None
    )
    for span in (from_json, from_protobuf):
        inner = span.attributes["deep"]
        for _ in range(MAX_VALUE_DEPTH - 1):
            inner = inner["k"]
        assert inner == {"k": "bottom"}


def test_nesting_past_the_limit_says_so() -> None:
    body = json_request([{"key": "deep", "value": nested_array_json(MAX_VALUE_DEPTH + 1)}])
    with pytest.raises(OtlpDecodeError, match=f"nested more than {MAX_VALUE_DEPTH} levels"):
        decode_otlp_traces(body, JSON, None)
    array = AnyValue()
    inner = array
    for _ in range(MAX_VALUE_DEPTH + 1):
        inner = inner.array_value.values.add()
    inner.string_value = "bottom"
    with pytest.raises(OtlpDecodeError, match=f"nested more than {MAX_VALUE_DEPTH} levels"):
        decode_otlp_traces(request_with_attribute("deep", array.SerializeToString()), PROTOBUF, None)


def test_deeply_nested_kvlist_json_is_a_clean_decode_error() -> None:
    depth = 10_000
    open_ = '{"kvlistValue": {"values": [{"key": "k", "value": ' * depth
    close = "}]}}" * depth
    value = json.loads(json_request([{"key": "deep", "value": {"stringValue": "PLACEHOLDER"}}]))
    text = json.dumps(value).replace('{"stringValue": "PLACEHOLDER"}', open_ + '{"stringValue": "x"}' + close)
    with pytest.raises(OtlpDecodeError):
        decode_otlp_traces(text.encode(), JSON, None)


def test_gzip_bomb_is_refused_without_inflating_it() -> None:
    compressor = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # level 1: fastest to build
    zeros = bytes(2**20)
    bomb = b"".join(compressor.compress(zeros) for _ in range(80)) + compressor.flush()  # 80 MiB of zeros
    assert len(bomb) < 1_000_000
    with pytest.raises(OtlpDecodeError, match="more than the limit"):
        decode_otlp_traces(bomb, PROTOBUF, "gzip")
    with pytest.raises(OtlpDecodeError, match="more than the limit of 1000 bytes"):
        decode_otlp_traces(gzip.compress(bytes(5000)), PROTOBUF, "gzip", max_decompressed_bytes=1000)


def test_broken_gzip_is_a_decode_error() -> None:
    with pytest.raises(OtlpDecodeError, match="not valid gzip"):
        decode_otlp_traces(b"plainly not gzip", PROTOBUF, "gzip")
    with pytest.raises(OtlpDecodeError, match="truncated"):
        decode_otlp_traces(gzip.compress(b"\x00" * 100)[:-10], PROTOBUF, "gzip")


def test_oversized_identity_body_is_refused() -> None:
    with pytest.raises(OtlpDecodeError, match="more than the limit of 10"):
        decode_otlp_traces(bytes(11), PROTOBUF, None, max_decompressed_bytes=10)


@pytest.mark.parametrize(
    ("content_type", "content_encoding"),
    [("text/plain", None), ("application/xml", None), ("", None), (PROTOBUF, "br"), (JSON, "deflate")],
)
def test_unsupported_media_type(content_type: str, content_encoding: str | None) -> None:
    with pytest.raises(UnsupportedMediaTypeError, match="application/x-protobuf or application/json"):
        decode_otlp_traces(b"", content_type, content_encoding)


IDS = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331"}


@pytest.mark.parametrize(
    ("span_fields", "problem"),
    [
        ({**IDS, "traceId": "abc"}, r"spans\[0\]\.traceId must be 16 bytes"),
        ({**IDS, "traceId": "zz" * 16}, "traceId must be 16 bytes"),
        ({**IDS, "spanId": ""}, "spanId is empty"),
        ({**IDS, "kind": "SPAN_KIND_SIDEWAYS"}, "kind must be one of"),
        ({**IDS, "startTimeUnixNano": "soon"}, "startTimeUnixNano must be an integer"),
        ({**IDS, "name": ""}, "invalid span"),
        ({**IDS, "attributes": [{"key": "b", "value": {"boolValue": "yes"}}]}, "boolValue must be true or false"),
        ({**IDS, "attributes": [{"key": "b", "value": {"bytesValue": "%%%"}}]}, "bytesValue must be base64"),
    ],
)
def test_malformed_json_span_names_the_problem(span_fields: dict[str, Any], problem: str) -> None:
    span = {"name": "x", **span_fields}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    with pytest.raises(OtlpDecodeError, match=problem):
        decode_otlp_traces(json.dumps(doc).encode(), JSON, None, default_rollout_id="ro", default_attempt_id="at")


def test_wrong_length_protobuf_span_id_is_rejected() -> None:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 4, name="x")
    with pytest.raises(OtlpDecodeError, match="spanId must be 8 bytes, got 4"):
        decode_otlp_traces(request.SerializeToString(), PROTOBUF, None)


# ---------------------------------------------------------------------------- response
def test_response_matches_the_request_format() -> None:
    body, content_type = encode_otlp_response(PROTOBUF)
    assert content_type == PROTOBUF
    response = ExportTraceServiceResponse()
    response.ParseFromString(body)
    assert not response.HasField("partial_success")

    body, content_type = encode_otlp_response("application/json; charset=utf-8")
    assert content_type == JSON
    assert json.loads(body) == {}

    with pytest.raises(UnsupportedMediaTypeError):
        encode_otlp_response("text/html")


# ---------------------------------------------------------------------------- end to end
@pytest.mark.parametrize("compression", ["none", "gzip"])
async def test_sdk_exporter_sends_spans_to_the_server(compression: str) -> None:
    """The stock OTLP/HTTP exporter, pointed at a running agentbolt server, stores spans
    under the rollout attempt named on its resource."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from agentbolt.server.testing import serve_in_thread
    from agentbolt.store import MemoryStore

    store = MemoryStore()
    rollout = await store.enqueue_rollout({"task": "add"})
    claim = await store.claim_rollout("worker-1")
    assert claim is not None

    with serve_in_thread(store, admin_token=None) as base_url:
        provider = TracerProvider(
            resource=Resource.create(
                {semconv.ROLLOUT_ID: rollout.rollout_id, semconv.ATTEMPT_ID: claim.attempt.attempt_id}
            )
        )
        exporter = OTLPSpanExporter(endpoint=f"{base_url}/v1/traces", timeout=10, compression=Compression(compression))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        tracer = provider.get_tracer("e2e")
        with tracer.start_as_current_span("agent.run"):
            with tracer.start_as_current_span("tool.call", attributes={"tool": "calculator", "args": [1, 2]}):
                pass
        assert provider.force_flush(10_000)
        provider.shutdown()

    spans = by_name(await store.get_spans(rollout.rollout_id))
    assert set(spans) == {"agent.run", "tool.call"}
    tool = spans["tool.call"]
    assert tool.attempt_id == claim.attempt.attempt_id
    assert tool.parent_id == spans["agent.run"].span_id
    assert tool.attributes["tool"] == "calculator" and tool.attributes["args"] == [1, 2]
    assert tool.sequence_id is not None
