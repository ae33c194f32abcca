"""``POST /v1/batch``: many store calls in one request.

The HTTP client coalesces concurrent calls of many runner tasks into one batch (see
:mod:`agentbolt.store.http.batching`). The ops run concurrently, so a backend that
group-commits concurrent writes (SQLite) commits them together, and each op succeeds or
fails on its own: the answer holds one result per op, in order.

The body is parsed with orjson and each op's arguments validated on their own, so one bad
op is one 422 result, not a rejected batch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, TypeAdapter, ValidationError

from agentbolt.server.errors import (
    INTERNAL_ERROR_MESSAGE,
    error_response,
    validation_details,
    validation_message,
)
from agentbolt.server.routes.context import (
    ERROR_RESPONSES,
    AdminOnly,
    ServerContext,
    StoreDep,
    context_of,
)
from agentbolt.server.routes.rollouts import sign_claims
from agentbolt.server.schemas import (
    AttemptRef,
    AttemptUpdate,
    BatchRequest,
    BatchResponse,
    ClaimRequest,
    EnqueueRequest,
    ReportAndClaimUpdate,
    SpansRequest,
    TypedBatchRequest,
    WorkerUpdate,
)
from agentbolt.store.base import Store
from agentbolt.store.errors import StoreError
from agentbolt.types import Attempt, Claim, ReportAndClaim, Rollout, Span, Worker

__all__ = ["router", "OPS"]

logger = logging.getLogger("agentbolt.server")

router = APIRouter(prefix="/v1", tags=["batch"], responses=ERROR_RESPONSES)


@dataclass(frozen=True, slots=True)
class _Op:
    args: type[BaseModel]
    result: TypeAdapter[Any]
    run: Callable[[Store, ServerContext, Any], Awaitable[Any]]


async def _claim(store: Store, ctx: ServerContext, a: ClaimRequest) -> list[Claim]:
    claims = await store.claim_rollouts(a.worker_id, a.limit, a.request_id)
    return sign_claims(claims, await ctx.secret())


async def _enqueue(store: Store, ctx: ServerContext, a: EnqueueRequest) -> list[Rollout]:
    return await store.enqueue_rollouts(a.rollouts)


async def _add_spans(store: Store, ctx: ServerContext, a: SpansRequest) -> list[Span]:
    stored = await store.add_spans(a.spans)
    ctx.telemetry.spans_ingested(len(a.spans))
    return stored


async def _update_attempt(store: Store, ctx: ServerContext, a: AttemptUpdate) -> Attempt:
    return await store.update_attempt(a.rollout_id, a.attempt_id, status=a.status, error=a.error, metadata=a.metadata)


async def _report_and_claim(store: Store, ctx: ServerContext, a: ReportAndClaimUpdate) -> ReportAndClaim:
    done = await store.report_and_claim(
        a.rollout_id, a.attempt_id, status=a.status, error=a.error, metadata=a.metadata,
        worker_id=a.worker_id, limit=a.limit, request_id=a.request_id,
    )
    sign_claims(done.claims, await ctx.secret())
    return done


async def _heartbeat(store: Store, ctx: ServerContext, a: AttemptRef) -> Attempt:
    return await store.heartbeat(a.rollout_id, a.attempt_id)


async def _update_worker(store: Store, ctx: ServerContext, a: WorkerUpdate) -> Worker:
    return await store.update_worker(a.worker_id, status=a.status, metadata=a.metadata)


OPS: dict[str, _Op] = {
    "claim_rollouts": _Op(ClaimRequest, TypeAdapter(list[Claim]), _claim),
    "enqueue_rollouts": _Op(EnqueueRequest, TypeAdapter(list[Rollout]), _enqueue),
    "add_spans": _Op(SpansRequest, TypeAdapter(list[Span]), _add_spans),
    "update_attempt": _Op(AttemptUpdate, TypeAdapter(Attempt), _update_attempt),
    "report_and_claim": _Op(ReportAndClaimUpdate, TypeAdapter(ReportAndClaim), _report_and_claim),
    "heartbeat": _Op(AttemptRef, TypeAdapter(Attempt), _heartbeat),
    "update_worker": _Op(WorkerUpdate, TypeAdapter(Worker), _update_worker),
}
"""The store methods a batch may call: op name → argument model, result type, call."""


def _failure(status: int, code: str, message: str, details: list[dict[str, Any]] | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    return orjson.dumps({"ok": False, "status": status, "error": error})


async def _run_one(store: Store, ctx: ServerContext, name: str, args: Any) -> bytes:
    """Run one op; ``args`` is its argument model, or a raw dict still to validate."""
    op = OPS[name]
    try:
        if not isinstance(args, BaseModel):
            args = op.args.model_validate(args)
        result = await op.run(store, ctx, args)
        return b'{"ok":true,"result":' + op.result.dump_json(result) + b"}"
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        return _failure(422, "validation_error", f"{name}: {validation_message(errors)}", validation_details(errors))
    except StoreError as exc:
        return _failure(exc.status_code, exc.code, exc.message)
    except Exception:
        logger.exception("unhandled error in batch op %s", name)
        return _failure(500, "internal_error", INTERNAL_ERROR_MESSAGE)


def _parse(raw: bytes) -> list[tuple[str, Any]] | Response:
    """The ops of a batch body: all typed in one pass when the body is valid; otherwise
    op by op, so that one bad op fails alone (its args stay a dict, checked later)."""
    try:
        return [(op.op, op.args) for op in TypedBatchRequest.model_validate_json(raw).ops]
    except ValidationError:
        pass
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return error_response(400, "invalid_json", f"malformed JSON body: {exc}")
    try:
        return [(op.op, op.args) for op in BatchRequest.model_validate(doc).ops]
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False, include_input=False)]
        ) from None


_SPANS_RESULT = TypeAdapter(list[Span])


async def _run_span_ops(store: Store, ctx: ServerContext, ops: list[SpansRequest]) -> list[bytes]:
    """Several validated ``add_spans`` ops as one store call (one lookup of each
    attempt, one write), sliced back per op. If the joint call fails — one op naming an
    unknown attempt fails it whole — each op runs again on its own, so only the bad one
    fails, as if they had never been joined."""
    joined = [span for op in ops for span in op.spans]
    try:
        stored = await store.add_spans(joined)
    except Exception:  # noqa: BLE001 - whatever failed, each op will report it on its own
        return list(await asyncio.gather(*(_run_one(store, ctx, "add_spans", op) for op in ops)))
    ctx.telemetry.spans_ingested(len(joined))
    out: list[bytes] = []
    start = 0
    for op in ops:
        end = start + len(op.spans)
        out.append(b'{"ok":true,"result":' + _SPANS_RESULT.dump_json(stored[start:end]) + b"}")
        start = end
    return out


async def _run_all(store: Store, ctx: ServerContext, ops: list[tuple[str, Any]]) -> list[bytes]:
    """Every op concurrently (so a group-committing store commits them together);
    validated ``add_spans`` ops are joined into one store call."""
    span_ops = [i for i, (name, args) in enumerate(ops) if name == "add_spans" and isinstance(args, SpansRequest)]
    if len(span_ops) < 2:
        return list(await asyncio.gather(*(_run_one(store, ctx, name, args) for name, args in ops)))
    joined = set(span_ops)
    others = [i for i in range(len(ops)) if i not in joined]
    gathered: list[Any] = await asyncio.gather(
        _run_span_ops(store, ctx, [ops[i][1] for i in span_ops]),
        *(_run_one(store, ctx, *ops[i]) for i in others),
    )
    span_results, other_results = gathered[0], gathered[1:]
    parts: list[bytes] = [b""] * len(ops)
    for i, part in zip(span_ops, span_results, strict=True):
        parts[i] = part
    for i, part in zip(others, other_results, strict=True):
        parts[i] = part
    return parts


_BATCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TypedBatchRequest"}}},
    }
}


@router.post(
    "/batch",
    summary="Run many store calls in one request",
    response_class=Response,
    responses={200: {"model": BatchResponse, "description": "One result per op, in order."}},
    openapi_extra=_BATCH_BODY,
    dependencies=[AdminOnly],
)
async def batch(request: Request, store: StoreDep) -> Response:
    """Body ``{"ops": [{"op": "add_spans", "args": {"spans": [...]}}, ...]}`` (at most
    10,000 ops; op is one of claim_rollouts, enqueue_rollouts, add_spans,
    update_attempt, report_and_claim, heartbeat, update_worker). The ops run concurrently, in no
    particular order; each result is ``{"ok": true, "result": ...}`` or
    ``{"ok": false, "status": 404, "error": {...}}``."""
    ops = _parse(await request.body())
    if isinstance(ops, Response):
        return ops
    parts = await _run_all(store, context_of(request), ops)
    return Response(b'{"results":[' + b",".join(parts) + b"]}", media_type="application/json")
