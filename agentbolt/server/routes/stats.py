"""Store-wide numbers, and an on-demand deadline check."""

from __future__ import annotations

from fastapi import APIRouter

from agentbolt.server.routes.context import ERROR_RESPONSES, AdminOnly, StoreDep
from agentbolt.server.schemas import DeadlineCheck
from agentbolt.types import StoreStats

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["stats"], responses=ERROR_RESPONSES, dependencies=[AdminOnly])


@router.get("/stats", response_model=StoreStats, summary="Counts by status, queue depth, totals")
async def stats(store: StoreDep) -> StoreStats:
    return await store.stats()


@router.post("/deadlines/check", response_model=DeadlineCheck, summary="Expire overdue attempts now")
async def check_deadlines(store: StoreDep) -> DeadlineCheck:
    """The server already does this in the background every ``deadline_check_interval``
    seconds; this runs one check at once (tests, operators)."""
    return DeadlineCheck(expired=await store.check_deadlines())
