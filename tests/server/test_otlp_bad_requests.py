"""OTLP ingestion refuses bad requests with clear errors: garbage, bad encodings,
deep nesting, zip bombs, unknown media types, malformed spans."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from otlp_requests import (  # tests/server/otlp_requests.py
    JSON,
    PROTOBUF,
    json_request,
    nested_array_json,
    nested_kvlist_protobuf,
    request_with_attribute,
)

from agentbolt.server.otlp import (
    MAX_VALUE_DEPTH,
    OtlpDecodeError,
    UnsupportedMediaTypeError,
    decode_otlp_traces,
)


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


