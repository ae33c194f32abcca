"""The FastAPI app serving a :class:`~agentbolt.store.base.Store` over HTTP, and
:func:`run_server` to run it.

Layers, outside in: telemetry (timing by route template) → error guard (a crash is a
logged 500, never a dropped connection) → body-size limit → authentication → (with a
gateway: its model calls, answered without the router, :mod:`.gateway_fast_path`) → routes.
The lifespan starts the store, checks deadlines in the background, and closes the store;
while the app runs, the startup heap is frozen out of garbage collection (:mod:`.gc_freeze`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import ipaddress
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentbolt.server import gc_freeze
from agentbolt.server.auth import AuthMiddleware
from agentbolt.server.dashboard.static import DashboardMiddleware
from agentbolt.server.errors import (
    ErrorGuardMiddleware,
    error_response,
    install_exception_handlers,
)
from agentbolt.server.gateway_fast_path import GatewayFastPath
from agentbolt.server.routes import ROUTERS
from agentbolt.server.routes.context import ServerContext
from agentbolt.server.schemas import TypedBatchRequest
from agentbolt.server.telemetry import ServerTelemetry
from agentbolt.store.base import Store
from agentbolt.version import __version__

if TYPE_CHECKING:
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import GatewaySpec

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_WEIGHTS_BYTES", "BodyTooLargeError", "create_app", "run_server"]

logger = logging.getLogger("agentbolt.server")

DEFAULT_MAX_BODY_BYTES = 16 * 2**20
DEFAULT_MAX_WEIGHTS_BYTES = 8 * 2**30
WEIGHTS_PATH = "/v1/gateway/weights"  # model weights: a limit of their own (max_weights_bytes)


class BodyTooLargeError(HTTPException):
    """A request body over the server's limit (HTTP 413)."""

    def __init__(self, limit: int, setting: str = "max_body_bytes") -> None:
        super().__init__(
            413,
            f"request body larger than this server's limit of {limit} bytes: send fewer items per request "
            f"(or start the server with a larger {setting})",
        )


class BodySizeLimitMiddleware:
    """413 for bodies over ``max_bytes`` (``max_weights_bytes`` on the weights route): at
    once from ``Content-Length``, and while streaming for chunked bodies, so no oversized
    body is ever held in memory."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_weights_bytes: int = DEFAULT_MAX_WEIGHTS_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_weights_bytes = max_weights_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        weights = scope["path"] == WEIGHTS_PATH or scope["path"].startswith(WEIGHTS_PATH + "/")  # parts too
        limit = self.max_weights_bytes if weights else self.max_bytes
        setting = "max_weights_bytes" if weights else "max_body_bytes"
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await error_response(400, "bad_request", "invalid Content-Length header")(scope, receive, send)
                    return
                if declared > limit:
                    err = BodyTooLargeError(limit, setting)
                    await _refuse_and_drain(str(err.detail), receive, send)
                    return
                break
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLargeError(limit, setting)
            return message

        async def send_tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, send_tracking)
        except BodyTooLargeError as err:
            if started:
                raise
            await _refuse_and_drain(str(err.detail), receive, send)


_DRAIN_BYTES = 64 << 20
_DRAIN_SECONDS = 10.0


async def _refuse_and_drain(message: str, receive: Receive, send: Send) -> None:
    """Send the 413, then read (and drop) what the client is still sending, up to
    :data:`_DRAIN_BYTES` or :data:`_DRAIN_SECONDS`, before the response ends and the
    connection closes: a client that sent its whole body at once gets the 413 to read
    instead of a reset (closing with unread data makes the kernel send RST, which drops
    the response before the client reads it). Past the bound the connection closes."""
    response = error_response(413, "payload_too_large", message, headers={"connection": "close"})
    await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": True})
    drained = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_DRAIN_SECONDS):
            while drained < _DRAIN_BYTES:
                event = await receive()
                if event["type"] != "http.request":
                    break
                drained += len(event.get("body", b""))
                if not event.get("more_body", False):
                    break
    await send({"type": "http.response.body", "body": b"", "more_body": False})


_CONVERTOR = re.compile(r"\{(\w+):\w+\}")


class TelemetryMiddleware:
    """Times every request and reports it under its route template
    (``/v1/rollouts/{rollout_id}``; convertors such as ``:path`` are left out)."""

    def __init__(self, app: ASGIApp, telemetry: ServerTelemetry) -> None:
        self.app = app
        self.telemetry = telemetry
        self._templates: dict[str, str] = {}

    def _template(self, scope: Scope) -> str:
        path = getattr(scope.get("route"), "path", None)  # third-party: Starlette's routes vary
        if path is None:
            return "unmatched"
        template = self._templates.get(path)
        if template is None:
            template = self._templates[path] = _CONVERTOR.sub(r"{\1}", path)
        return template

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500

        async def send_tracking(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        finally:
            self.telemetry.observe_request(scope["method"], self._template(scope), status, time.perf_counter() - t0)


async def _check_deadlines_forever(store: Store) -> None:
    """Expire overdue attempts every ``store.deadline_check_interval`` seconds."""
    while True:
        await asyncio.sleep(store.deadline_check_interval)
        try:
            await store.check_deadlines()
        except Exception:
            logger.exception("deadline check failed; retrying in a second")
            await asyncio.sleep(1.0)


def _openapi_with_extras(app: FastAPI) -> dict[str, Any]:
    """The generated schema plus the models of bodies parsed by hand (the batch body)."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=app.openapi_tags,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    extra = TypedBatchRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in extra.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components["TypedBatchRequest"] = extra
    app.openapi_schema = schema
    return schema


_TAGS = [
    {"name": "rollouts", "description": "Enqueue, list, read, cancel and wait for rollouts."},
    {"name": "queue", "description": "Claim queued rollouts; each claim carries a rollout-scoped token."},
    {"name": "attempts", "description": "Tries of a rollout: progress, outcome, heartbeat, reward."},
    {"name": "spans", "description": "OpenTelemetry-shaped spans, idempotent by span id."},
    {"name": "resources", "description": "Versioned resources (model endpoints, prompts...)."},
    {"name": "workers", "description": "Runners and controllers known to the store."},
    {"name": "stats", "description": "Store-wide counts; deadline checks."},
    {"name": "batch", "description": "Many store calls in one request (used by the HTTP client)."},
    {"name": "observability", "description": "OTLP trace ingestion and Prometheus metrics."},
    {"name": "health", "description": "Liveness, without a token."},
]


def create_app(
    store: Store,
    *,
    admin_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    deadline_check: bool = True,
    gateway: Gateway | None = None,
    max_weights_bytes: int = DEFAULT_MAX_WEIGHTS_BYTES,
    cors_origins: Sequence[str] = (),
) -> FastAPI:
    """The HTTP API over ``store``.

    ``admin_token`` — when set, every call needs it (or a rollout-scoped token, for the
    few calls an agent makes); when ``None`` the API is open, so bind it to loopback
    only. ``max_body_bytes`` — larger request bodies get 413. ``deadline_check`` — expire
    overdue attempts in the background (turn off when another process does it).
    ``gateway`` — mount this OpenAI-compatible model gateway (see ``docs/gateway.md``):
    it records into ``store`` and starts and stops with the app. ``max_weights_bytes`` —
    the body limit of the gateway's weight-update route (model weights are large).
    ``cors_origins`` — browser origins (``https://host:port``) allowed to call the API,
    e.g. a dashboard served elsewhere; none by default. The web dashboard itself is
    served at ``/`` (see :mod:`agentbolt.server.dashboard.static`).
    """
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
    telemetry = ServerTelemetry()
    ctx = ServerContext(store, admin_token=admin_token, telemetry=telemetry)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx.loop = asyncio.get_running_loop()
        await ctx.ready()
        await ctx.secret()
        if gateway is not None:
            await gateway.start()
        task = asyncio.create_task(_check_deadlines_forever(store)) if deadline_check else None
        gc_freeze.freeze()  # full collections then skip the startup heap (short pauses under load)
        try:
            yield
        finally:
            gc_freeze.thaw()
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if gateway is not None:
                await gateway.close()  # stores the spans still pending
            await ctx.shutdown()

    app = FastAPI(
        title="agentbolt",
        version=__version__,
        description=(
            "The agentbolt store over HTTP: a rollout queue with claims and retries, spans, "
            "versioned resources and workers. Send `Authorization: Bearer <token>`: the admin "
            "token, or the rollout-scoped token a claim returned."
        ),
        openapi_tags=_TAGS,
        lifespan=lifespan,
    )
    app.state.agentbolt = ctx
    if gateway is not None:
        from agentbolt.server.routes.gateway import (  # only with a gateway: loads its engines
            PROXY_ROUTES,
            gateway_router,
        )
        from agentbolt.server.routes.gateway_admin import gateway_admin_router
        from agentbolt.server.routes.gateway_weight_streams import weight_streams_router

        gateway.bind(store)
        app.state.gateway = gateway
        app.include_router(gateway_router)
        app.include_router(gateway_admin_router)
        app.include_router(weight_streams_router)
        # the innermost middleware (added first): model calls skip the router, same answers
        app.add_middleware(GatewayFastPath, routes=PROXY_ROUTES)
    for router in ROUTERS:
        app.include_router(router)
    install_exception_handlers(app)
    # add_middleware wraps: the last added runs first.
    app.add_middleware(AuthMiddleware, admin_token=admin_token, secret=ctx.secret)
    app.add_middleware(DashboardMiddleware)  # the dashboard's files need no token
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=max_body_bytes, max_weights_bytes=max_weights_bytes)
    app.add_middleware(ErrorGuardMiddleware)
    app.add_middleware(TelemetryMiddleware, telemetry=telemetry)
    if cors_origins:  # outermost: preflights carry no token, and errors need the CORS headers too
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "PATCH", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            max_age=600,
        )
    # FastAPI's documented way to extend the schema is to replace app.openapi
    app.openapi = lambda: _openapi_with_extras(app)  # type: ignore[method-assign]
    return app


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _server_class():  # uvicorn is imported lazily
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, telling long-polls to answer as soon as shutdown begins
        (otherwise a waiting client holds up the graceful shutdown)."""

        def __init__(self, config: uvicorn.Config, ctx: ServerContext) -> None:
            super().__init__(config)
            self._agentbolt_ctx = ctx

        def handle_exit(self, sig: int, frame: Any) -> None:
            self._agentbolt_ctx.begin_exit()
            super().handle_exit(sig, frame)

    return Server


def run_server(
    store_url: str = "sqlite:///agentbolt.db",
    host: str = "127.0.0.1",
    port: int = 4747,
    admin_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    log_level: str = "info",
    gateway: GatewaySpec | Gateway | None = None,
    cors_origins: Sequence[str] = (),
    sockets: Sequence[socket.socket] | None = None,
) -> None:
    """Serve the store at ``store_url`` on ``host:port`` until interrupted (blocks).

    Without ``admin_token`` anyone who can reach the port drives the store, so the server
    then refuses to listen anywhere but loopback. ``gateway`` — mount a model gateway:
    a :class:`~agentbolt.gateway.GatewaySpec` is built here, before the server listens
    (a local model is loaded first), so a process can be told which engine to serve.
    ``cors_origins`` — browser origins allowed to call the API (a dashboard served elsewhere).
    ``sockets`` — listen on these already bound sockets instead of binding ``host:port``
    (``agentbolt server --workers N``: N processes accepting on one socket).
    """
    import uvicorn

    from agentbolt.store.url import open_store

    if admin_token is None and not _is_loopback(host):
        raise ValueError(f"no admin token: refusing to listen on {host}; pass --admin-token or bind 127.0.0.1")
    if not logging.getLogger().handlers:
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if admin_token is None:
        logger.warning("no admin token: the API is unauthenticated; anyone on this machine can use %s:%d", host, port)
    if gateway is not None:
        from agentbolt.gateway.spec import GatewaySpec

        if isinstance(gateway, GatewaySpec):  # built here, in the server's process
            logger.info("starting the gateway: %s", gateway.engine.describe())
            gateway = gateway.build()
    app = create_app(
        open_store(store_url),
        admin_token=admin_token,
        max_body_bytes=max_body_bytes,
        gateway=gateway,
        cors_origins=cors_origins,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        http="httptools" if importlib.util.find_spec("httptools") else "h11",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    _server_class()(config, app.state.agentbolt).run(sockets=list(sockets) if sockets else None)
