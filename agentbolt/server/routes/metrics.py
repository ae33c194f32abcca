"""Training metrics: a trainer posts one record per step, the dashboard polls them.

Admin only: rollout-scoped tokens (agents) get 403. Not to be confused with
``GET /metrics``, the server's own Prometheus numbers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from agentbolt.server.routes.context import ERROR_RESPONSES, AdminOnly, StoreDep
from agentbolt.types import MetricRecord

__all__ = ["router", "MetricsRequest", "MAX_METRIC_RECORDS"]

MAX_METRIC_RECORDS = 10_000
"""Most records one ``POST /v1/metrics`` may carry."""

router = APIRouter(prefix="/v1/metrics", tags=["metrics"], responses=ERROR_RESPONSES, dependencies=[AdminOnly])


class MetricsRequest(BaseModel):
    """Records to upsert by ``(run_id, step)``; a step already stored is merged."""

    model_config = ConfigDict(extra="forbid")
    records: list[MetricRecord] = Field(max_length=MAX_METRIC_RECORDS)


@router.post(
    "",
    status_code=204,
    response_class=Response,
    summary="Add training metrics (upsert and merge by run_id and step)",
    responses={204: {"description": "Stored (durably, on a durable backend)."}},
)
async def add_metrics(body: MetricsRequest, store: StoreDep) -> Response:
    """New keys of a step already stored are added and same keys overwritten, so the
    train and eval metrics of one step may be posted separately; re-posting is safe.
    NaN and infinite values are stored as null."""
    await store.add_metrics(body.records)
    return Response(status_code=204)


@router.get("", response_model=list[MetricRecord], summary="Read a run's metrics, by step ascending")
async def query_metrics(
    store: StoreDep,
    run_id: Annotated[str, Query(min_length=1, max_length=200, description="The training run.")],
    after_step: Annotated[
        int | None, Query(ge=-1, le=2**63 - 1, description="Only steps after this one: the last step you have.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[MetricRecord]:
    """Poll with ``after_step`` = the last step received to get only new points. An
    unknown run answers an empty list."""
    return await store.query_metrics(run_id, after_step=after_step, limit=limit)


@router.get("/runs", response_model=list[str], summary="List runs that logged metrics, most recent first")
async def metric_runs(store: StoreDep, limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> list[str]:
    return await store.metric_runs(limit=limit)
