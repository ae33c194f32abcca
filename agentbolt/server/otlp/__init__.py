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

The parts: :mod:`.common` (limits, enum tables, errors, attribution),
:mod:`.protobuf` and :mod:`.json_format` (one encoding each); this module holds the
entry points and the transport (content types, gzip).

Errors: :class:`OtlpDecodeError` (answer 400) says what is wrong and where;
:class:`UnsupportedMediaTypeError` (answer 415) names what is supported.
"""

from __future__ import annotations

import zlib

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from agentbolt.server.otlp.common import (
    _JSON_TYPES,
    _PROTOBUF_TYPES,
    _SUPPORTED,
    JSON_CONTENT_TYPE,
    MAX_VALUE_DEPTH,
    PROTOBUF_CONTENT_TYPE,
    OtlpDecodeError,
    UnsupportedMediaTypeError,
    _to_span,
)
from agentbolt.server.otlp.json_format import _read_json
from agentbolt.server.otlp.protobuf import _read_protobuf
from agentbolt.types import Span

__all__ = [
    "OtlpDecodeError",
    "UnsupportedMediaTypeError",
    "decode_otlp_traces",
    "encode_otlp_response",
    "PROTOBUF_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "MAX_VALUE_DEPTH",
]


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
