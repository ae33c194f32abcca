"""The gateway's model calls, answered without the router: the server's hottest path.

A proxied model call (``POST …/v1/chat/completions``, ``…/v1/completions`` or
``…/v1/responses``, under an attempt's prefix or plain) used to pass, inside the app's
middleware, through Starlette's exception middleware, a match against the app's routers
and FastAPI's request handling (its solving of the two path parameters as dependencies)
before its handler ran: about a fifth of the gateway's own time per call
(``docs/benchmarks.md``, "Gateway overhead"). :class:`GatewayFastPath` sits innermost in
the middleware, matches these routes itself (each route's own ``matches``) and calls
their endpoint. What the call looks like from outside is unchanged: the middleware
around it (telemetry, error guard, body-size limit, dashboard, authentication) runs as
before, the scope carries the matched route and path parameters as the router leaves
them (so telemetry reports the route template), and an exception the app has a handler
for is answered by that handler, as the router's exception middleware would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["GatewayFastPath"]

Handler = Callable[[Request, Exception], Awaitable[Response]]
"""An exception handler of the app (the server's are all async and take a request)."""


class GatewayFastPath:
    """Answers ``POST`` on ``routes`` by calling their endpoint directly; everything else
    goes on to ``app`` (the router). Each route's endpoint takes the request and the
    route's path parameters (strings) and returns a response."""

    def __init__(self, app: ASGIApp, routes: Sequence[APIRoute]) -> None:
        self.app = app
        self.routes = tuple(routes)
        self._endings = tuple({route.path.rsplit("/", 1)[-1] for route in self.routes})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].endswith(self._endings):
            for route in self.routes:
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    scope.update(child_scope)
                    await _answer(route, scope, receive, send)
                    return
        await self.app(scope, receive, send)


async def _answer(route: APIRoute, scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive, send)
    try:
        response = await route.endpoint(request, **scope["path_params"])
    except Exception as exc:
        handler = _handler_of(scope["app"].exception_handlers, exc)
        if handler is None:
            raise
        response = await handler(request, exc)
    await response(scope, receive, send)


def _handler_of(handlers: Mapping[Any, Handler], exc: Exception) -> Handler | None:
    """The app's handler of ``exc``, found as the router's exception middleware finds it:
    an HTTP error's status code first, then the exception's classes, nearest first."""
    if isinstance(exc, HTTPException) and exc.status_code in handlers:
        return handlers[exc.status_code]
    return next((handlers[cls] for cls in type(exc).__mro__ if cls in handlers), None)
