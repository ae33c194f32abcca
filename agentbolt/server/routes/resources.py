"""Resources: publish a new version (whole or merged), read versions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from agentbolt.server.routes.context import ERROR_RESPONSES, AdminOnly, StoreDep
from agentbolt.server.schemas import ResourcesRequest
from agentbolt.store.errors import NotFoundError
from agentbolt.types import Page, Resources

__all__ = ["router"]

router = APIRouter(prefix="/v1/resources", tags=["resources"], responses=ERROR_RESPONSES, dependencies=[AdminOnly])


@router.post("", response_model=Resources, summary="Publish a resources version")
async def add_resources(body: ResourcesRequest, store: StoreDep) -> Resources:
    """A new version holding exactly ``resources``."""
    return await store.add_resources(body.resources, body.metadata)


@router.patch("", response_model=Resources, summary="Publish a version merged into the latest")
async def update_resources(body: ResourcesRequest, store: StoreDep) -> Resources:
    """A new version: the latest bundle with ``resources`` replacing or adding entries by name."""
    return await store.update_resources(body.resources, body.metadata)


@router.get("", response_model=Page[Resources], summary="List resources versions, newest first")
async def query_resources(
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    cursor: Annotated[str | None, Query(max_length=10_000)] = None,
) -> Page[Resources]:
    return await store.query_resources(limit=limit, cursor=cursor)


@router.get("/latest", response_model=Resources, summary="Get the latest resources version")
async def get_latest_resources(store: StoreDep) -> Resources:
    """404 while no version has been published."""
    latest = await store.get_latest_resources()
    if latest is None:
        raise NotFoundError("no resources published yet: POST /v1/resources first")
    return latest


@router.get("/{version}", response_model=Resources, summary="Get a resources version")
async def get_resources(version: Annotated[int, Path(ge=1, le=2**53)], store: StoreDep) -> Resources:
    return await store.get_resources(version)
