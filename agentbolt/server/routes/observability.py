"""OpenTelemetry trace ingestion (``POST /v1/traces``) and Prometheus ``GET /metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from agentbolt.server.errors import error_response
from agentbolt.server.otlp import (
    OtlpDecodeError,
    UnsupportedMediaTypeError,
    decode_otlp_traces,
    encode_otlp_response,
)
from agentbolt.server.routes.context import (
    ERROR_RESPONSES,
    AdminOnly,
    CallerDep,
    ContextDep,
    StoreDep,
)

__all__ = ["router"]

router = APIRouter(tags=["observability"], responses=ERROR_RESPONSES)

_OTLP_BODY = {
    "requestBody": {
        "required": True,
        "description": "An OTLP ExportTraceServiceRequest, protobuf or OTLP/JSON, optionally gzip'd.",
        "content": {
            "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": {"type": "object"}},
        },
    }
}


@router.post(
    "/v1/traces",
    summary="Ingest OpenTelemetry traces (OTLP/HTTP)",
    response_class=Response,
    responses={
        200: {"description": "An empty ExportTraceServiceResponse, in the request's format."},
        415: {"description": "Unsupported Content-Type or Content-Encoding."},
    },
    openapi_extra=_OTLP_BODY,
)
async def ingest_traces(request: Request, store: StoreDep, caller: CallerDep, ctx: ContextDep) -> Response:
    """Point an OTLP/HTTP exporter here. Spans name their rollout attempt with the
    ``agentbolt.rollout_id`` / ``agentbolt.attempt_id`` attributes; with a rollout-scoped
    token they default to the token's attempt (and may not name another one)."""
    body = await request.body()
    content_type = request.headers.get("content-type", "")
    scope = caller.scope
    try:
        spans = decode_otlp_traces(
            body,
            content_type,
            request.headers.get("content-encoding"),
            default_rollout_id=scope.rollout_id if scope else None,
            default_attempt_id=scope.attempt_id if scope else None,
        )
    except UnsupportedMediaTypeError as exc:
        return error_response(415, "unsupported_media_type", str(exc))
    except OtlpDecodeError as exc:
        return error_response(400, "invalid_otlp", str(exc))
    for s in spans:
        caller.require_attempt(s.rollout_id, s.attempt_id, "posting spans of another attempt")
    if spans:
        await store.add_spans(spans)
        ctx.telemetry.spans_ingested(len(spans))
    payload, media_type = encode_otlp_response(content_type)
    return Response(payload, media_type=media_type)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text exposition."}},
    dependencies=[AdminOnly],
)
async def metrics(store: StoreDep, ctx: ContextDep) -> Response:
    payload, content_type = await ctx.telemetry.render(store)
    return Response(payload, media_type=content_type)
