"""Rollouts: enqueue, list, read, cancel, wait for them; and claim them (the queue)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

from fastapi import APIRouter, Query, Request

from agentbolt.scoped import mint_scoped_token
from agentbolt.server.routes.context import (
    ERROR_RESPONSES,
    AdminOnly,
    CallerDep,
    ContextDep,
    RolloutIdPath,
    StoreDep,
)
from agentbolt.server.schemas import (
    ClaimRequest,
    EnqueueRequest,
    RolloutCount,
    RolloutCountQuery,
    RolloutPatch,
    RolloutQuery,
    WaitRequest,
)
from agentbolt.types import Claim, Page, Rollout, RolloutMode, RolloutStatus

__all__ = ["router", "sign_claims"]

router = APIRouter(prefix="/v1", tags=["rollouts"], responses=ERROR_RESPONSES)


def sign_claims(claims: list[Claim], secret: bytes) -> list[Claim]:
    """Give each claim the token scoped to its new attempt."""
    for c in claims:
        c.token = mint_scoped_token(secret, c.rollout.rollout_id, c.attempt.attempt_id)
    return claims


@router.post("/rollouts", response_model=list[Rollout], summary="Enqueue rollouts", dependencies=[AdminOnly])
async def enqueue_rollouts(body: EnqueueRequest, store: StoreDep) -> list[Rollout]:
    """Queue rollouts in order. A ``rollout_id`` that is already stored is not queued
    again: the stored rollout comes back, so re-sending is safe."""
    return await store.enqueue_rollouts(body.rollouts)


@router.get("/rollouts", response_model=Page[Rollout], summary="List rollouts", dependencies=[AdminOnly])
async def list_rollouts(
    store: StoreDep,
    status: Annotated[list[RolloutStatus] | None, Query(description="Repeat to match any of several.")] = None,
    mode: RolloutMode | None = None,
    rollout_id: Annotated[list[str] | None, Query(description="Repeat to list several ids.")] = None,
    search: Annotated[
        str | None, Query(max_length=200, description="Substring of the id or the input's JSON (ASCII case ignored).")
    ] = None,
    sort_by: Annotated[
        str,
        Query(
            description="created_at, updated_at, rollout_id, reward, start_time, end_time, duration or attempt_count."
        ),
    ] = "created_at",
    descending: bool = False,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    cursor: Annotated[str | None, Query(max_length=10_000, description="next_cursor of the previous page.")] = None,
) -> Page[Rollout]:
    return await store.query_rollouts(
        status=status,
        mode=mode,
        rollout_ids=rollout_id,
        search=search,
        sort_by=sort_by,
        descending=descending,
        limit=limit,
        cursor=cursor,
    )


@router.post(
    "/rollouts/query",
    response_model=Page[Rollout],
    summary="List rollouts (filters in the body)",
    dependencies=[AdminOnly],
)
async def query_rollouts(body: RolloutQuery, store: StoreDep) -> Page[Rollout]:
    """Same as ``GET /v1/rollouts``, for filters too long for a URL (thousands of ids)."""
    return await store.query_rollouts(
        status=body.status,
        mode=body.mode,
        rollout_ids=body.rollout_ids,
        search=body.search,
        sort_by=body.sort_by,
        descending=body.descending,
        limit=body.limit,
        cursor=body.cursor,
    )


@router.post(
    "/rollouts/count", response_model=RolloutCount, summary="Count rollouts matching filters", dependencies=[AdminOnly]
)
async def count_rollouts(body: RolloutCountQuery, store: StoreDep) -> RolloutCount:
    """The number of rollouts ``GET /v1/rollouts`` would list with these filters (all
    pages); with ``cap``, at most ``cap``."""
    count = await store.count_rollouts(status=body.status, mode=body.mode, search=body.search, cap=body.cap)
    return RolloutCount(count=count)


@router.post(
    "/rollouts/wait", response_model=list[Rollout], summary="Wait for rollouts to finish", dependencies=[AdminOnly]
)
async def wait_for_rollouts(body: WaitRequest, store: StoreDep, ctx: ContextDep, request: Request) -> list[Rollout]:
    """Long-poll: answers as soon as every listed rollout has finished, or after
    ``timeout`` seconds (at most 30) with the ones that have. Call again to wait longer.
    It also answers early (with the ones finished so far) when the client goes away or
    the server shuts down."""
    waiter = asyncio.ensure_future(store.wait_for_rollouts(body.rollout_ids, timeout=body.timeout))
    exiting = asyncio.ensure_future(ctx.exiting.wait())
    try:
        while True:
            done, _ = await asyncio.wait({waiter, exiting}, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
            if waiter in done:
                return waiter.result()
            if exiting in done or await request.is_disconnected():
                break
    finally:
        exiting.cancel()
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiter
    return await store.wait_for_rollouts(body.rollout_ids, timeout=0)


@router.get("/rollouts/{rollout_id:path}", response_model=Rollout, summary="Get a rollout")
async def get_rollout(rollout_id: RolloutIdPath, store: StoreDep, caller: CallerDep) -> Rollout:
    caller.require_rollout(rollout_id, "reading another rollout")
    return await store.get_rollout(rollout_id)


@router.patch(
    "/rollouts/{rollout_id:path}", response_model=Rollout, summary="Update a rollout", dependencies=[AdminOnly]
)
async def update_rollout(rollout_id: RolloutIdPath, body: RolloutPatch, store: StoreDep) -> Rollout:
    """Merge ``metadata``; ``status`` may only be ``cancelled`` (other changes happen by
    reporting attempts)."""
    return await store.update_rollout(rollout_id, status=body.status, metadata=body.metadata)


@router.post(
    "/rollouts/{rollout_id:path}/cancel", response_model=Rollout, summary="Cancel a rollout", dependencies=[AdminOnly]
)
async def cancel_rollout(rollout_id: RolloutIdPath, store: StoreDep) -> Rollout:
    """Cancel a rollout that has not finished; its running attempt fails. Idempotent."""
    return await store.cancel_rollout(rollout_id)


@router.post(
    "/claims", response_model=list[Claim], summary="Claim queued rollouts", tags=["queue"], dependencies=[AdminOnly]
)
async def claim_rollouts(body: ClaimRequest, store: StoreDep, ctx: ContextDep) -> list[Claim]:
    """Take up to ``limit`` rollouts in queue order, each with a new attempt and a
    ``token`` scoped to it (for the agent's spans, reward and model calls). Re-sending
    the same ``request_id`` returns the same claims."""
    claims = await store.claim_rollouts(body.worker_id, body.limit, body.request_id)
    return sign_claims(claims, await ctx.secret())
