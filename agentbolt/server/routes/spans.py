"""Spans: post them (idempotent by span id), read a rollout's spans page by page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agentbolt.server.routes.context import (
    ERROR_RESPONSES,
    CallerDep,
    ContextDep,
    RolloutIdPath,
    StoreDep,
)
from agentbolt.server.schemas import SpansRequest
from agentbolt.types import Page, Span

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["spans"], responses=ERROR_RESPONSES)


@router.post("/spans", response_model=list[Span], summary="Add spans")
async def add_spans(body: SpansRequest, store: StoreDep, caller: CallerDep, ctx: ContextDep) -> list[Span]:
    """Store spans, each once per ``(rollout_id, attempt_id, span_id)``; they come back
    with their ``sequence_id``. A scoped token may only post spans of its own attempt."""
    for s in body.spans:
        caller.require_attempt(s.rollout_id, s.attempt_id, "posting spans of another attempt")
    stored = await store.add_spans(body.spans)
    ctx.telemetry.spans_ingested(len(body.spans))
    return stored


@router.get("/rollouts/{rollout_id:path}/spans", response_model=Page[Span], summary="List a rollout's spans")
async def query_spans(
    rollout_id: RolloutIdPath,
    store: StoreDep,
    caller: CallerDep,
    attempt_id: Annotated[
        str | None, Query(min_length=1, max_length=200, description='One attempt, or "latest"; all when omitted.')
    ] = None,
    name: Annotated[str | None, Query(max_length=1000, description="Only spans with this name.")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    cursor: Annotated[str | None, Query(max_length=10_000)] = None,
) -> Page[Span]:
    """Ordered by attempt, then sequence id."""
    caller.require_rollout(rollout_id, "reading another rollout's spans")
    return await store.query_spans(rollout_id, attempt_id, name=name, limit=limit, cursor=cursor)
