"""Workers: register or heartbeat, list, read."""

from __future__ import annotations

from fastapi import APIRouter

from agentbolt.server.routes.context import (
    ERROR_RESPONSES,
    AdminOnly,
    StoreDep,
    WorkerIdPath,
)
from agentbolt.server.schemas import WorkerPatch
from agentbolt.types import Worker

__all__ = ["router"]

router = APIRouter(prefix="/v1/workers", tags=["workers"], responses=ERROR_RESPONSES, dependencies=[AdminOnly])


@router.post("/{worker_id:path}", response_model=Worker, summary="Register a worker or refresh its heartbeat")
async def update_worker(worker_id: WorkerIdPath, body: WorkerPatch, store: StoreDep) -> Worker:
    return await store.update_worker(worker_id, status=body.status, metadata=body.metadata)


@router.get("", response_model=list[Worker], summary="List workers")
async def query_workers(store: StoreDep) -> list[Worker]:
    return await store.query_workers()


@router.get("/{worker_id:path}", response_model=Worker, summary="Get a worker")
async def get_worker(worker_id: WorkerIdPath, store: StoreDep) -> Worker:
    return await store.get_worker(worker_id)
