"""What every route needs: the store (started), its signing secret, the caller.

Routes get these through FastAPI dependencies (``StoreDep``, ``CallerDep``...), so a
handler is one line of store call plus the permission check it needs.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agentbolt.server.auth import Principal, principal_of
from agentbolt.server.schemas import ErrorResponse
from agentbolt.server.telemetry import ServerTelemetry
from agentbolt.store.base import Store

__all__ = [
    "ServerContext",
    "context_of",
    "StoreDep",
    "CallerDep",
    "ContextDep",
    "AdminOnly",
    "RolloutIdPath",
    "AttemptIdPath",
    "WorkerIdPath",
    "ERROR_RESPONSES",
]


class ServerContext:
    """The server's shared state: one per app.

    The lifespan starts the store; if an app is driven without its lifespan (some ASGI
    test clients), the first request starts it instead.
    """

    def __init__(self, store: Store, *, admin_token: str | None, telemetry: ServerTelemetry) -> None:
        self.store = store
        self.admin_token = admin_token
        self.telemetry = telemetry
        self._secret: bytes | None = None
        self._started = False
        self._lock = asyncio.Lock()
        #: set when the server begins to shut down, so long-polls answer at once
        self.exiting = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    def begin_exit(self) -> None:
        """Tell long-running requests to finish now. Safe from a signal handler or any
        thread."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.exiting.set)

    async def ready(self) -> Store:
        """The store, started."""
        if not self._started:
            async with self._lock:
                if not self._started:
                    await self.store.start()
                    self._started = True
        return self.store

    async def secret(self) -> bytes:
        """The store's token-signing secret (read once, then cached)."""
        if self._secret is None:
            store = await self.ready()
            self._secret = await store.get_secret()
        return self._secret

    async def shutdown(self) -> None:
        if self._started:
            self._started = False
            await self.store.close()


def context_of(request: Request) -> ServerContext:
    """The app's :class:`ServerContext` (usable outside FastAPI dependencies too)."""
    return request.app.state.agentbolt


async def _store(request: Request) -> Store:
    return await context_of(request).ready()


_bearer = HTTPBearer(auto_error=False, description="The admin token, or a rollout-scoped token from a claim.")


# Dependencies are ``async def`` on purpose: FastAPI runs plain ``def`` dependencies in a
# thread pool, a costly hop on every request.


async def _context(request: Request) -> ServerContext:
    return context_of(request)


async def _caller(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Principal:
    # The header was already checked by AuthMiddleware; HTTPBearer is here so the
    # OpenAPI schema shows the security scheme.
    return principal_of(request.scope)


async def _admin_only(request: Request, caller: Annotated[Principal, Depends(_caller)]) -> None:
    path = getattr(request.scope.get("route"), "path", request.url.path)  # third-party: Starlette's routes vary
    caller.require_admin(f"{request.method} {path}")


StoreDep = Annotated[Store, Depends(_store)]
CallerDep = Annotated[Principal, Depends(_caller)]
ContextDep = Annotated[ServerContext, Depends(_context)]
AdminOnly = Depends(_admin_only)
"""Router/route dependency: refuse scoped tokens."""

RolloutIdPath = Annotated[str, Path(min_length=1, max_length=200, description="A rollout id.")]
AttemptIdPath = Annotated[str, Path(min_length=1, max_length=200, description="An attempt id of that rollout.")]
WorkerIdPath = Annotated[str, Path(min_length=1, max_length=200, description="A worker id.")]


def _err(description: str) -> dict[str, object]:
    return {"model": ErrorResponse, "description": description}


ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    400: _err("Malformed request (bad JSON, bad cursor...)."),
    401: _err("No token, and this server requires one."),
    403: _err("Wrong token, or a scoped token used outside its rollout attempt."),
    404: _err("Unknown id."),
    409: _err("Illegal status transition or conflicting data."),
    413: _err("Request body larger than the server accepts."),
    422: _err("Request failed validation."),
}
"""Error answers every store route may give, for the OpenAPI schema."""
