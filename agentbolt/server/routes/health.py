"""``GET /healthz``: is the server up, and on which store. Needs no token."""

from __future__ import annotations

from fastapi import APIRouter, Request

from agentbolt.server.routes.context import context_of
from agentbolt.server.schemas import Health
from agentbolt.version import __version__

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness check")
async def healthz(request: Request) -> Health:
    return Health(store=type(context_of(request).store).__name__, version=__version__)
