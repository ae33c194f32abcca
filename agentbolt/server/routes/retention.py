"""Retention: delete the spans of finished rollouts so the store does not grow forever.

Admin only. Exporting needs no route of its own: ``agentbolt.store.export`` reads
through the ordinary query routes, page by page.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from agentbolt.server.routes.context import ERROR_RESPONSES, AdminOnly, StoreDep

__all__ = ["DeleteSpansAnswer", "DeleteSpansRequest", "router"]

log = logging.getLogger("agentbolt.server.retention")

router = APIRouter(prefix="/v1/retention", tags=["retention"], responses=ERROR_RESPONSES, dependencies=[AdminOnly])


class DeleteSpansRequest(BaseModel):
    """Which finished rollouts lose their spans; at least one of ``before`` and
    ``rollout_ids`` is required."""

    model_config = ConfigDict(extra="forbid")
    before: float | None = Field(
        default=None, allow_inf_nan=False, description="Rollouts that finished before this time (epoch seconds)."
    )
    rollout_ids: list[str] | None = Field(
        default=None, max_length=10_000, description="Only these rollouts (unknown or unfinished ids are skipped)."
    )
    dry_run: bool = Field(default=False, description="Count the spans that would go; delete nothing.")


class DeleteSpansAnswer(BaseModel):
    deleted: int = Field(description="Spans deleted (with dry_run: that would be deleted).")


@router.post(
    "/delete-spans",
    response_model=DeleteSpansAnswer,
    summary="Delete the spans of finished rollouts (or count them with dry_run)",
)
async def delete_spans(body: DeleteSpansRequest, store: StoreDep) -> DeleteSpansAnswer:
    """Spans of queued or running rollouts are never deleted. Rollouts, attempts and
    rewards stay. Safe to repeat: a second call finds nothing left."""
    deleted = await store.delete_spans(before=body.before, rollout_ids=body.rollout_ids, dry_run=body.dry_run)
    if not body.dry_run:
        log.info("deleted %d spans (before=%s, %s rollout ids)", deleted, body.before,
                 "all" if body.rollout_ids is None else len(body.rollout_ids))
    return DeleteSpansAnswer(deleted=deleted)
