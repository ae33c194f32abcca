"""The gateway's model calls skip the router (:mod:`agentbolt.server.gateway_fast_path`)
and are answered exactly as the router answers them: the same route in the scope (so
telemetry reports its template), the same answers to good and bad calls, the same 413
for a body over the limit; every other request still reaches the router."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from gateway.fakes import FakeEngine
from starlette.types import ASGIApp, Receive, Scope, Send

from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.server import create_app
from agentbolt.server.auth import ADMIN, PRINCIPAL_KEY
from agentbolt.server.errors import install_exception_handlers
from agentbolt.server.routes.gateway import PROXY_ROUTES, gateway_router
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore

ADMIN_TOKEN = "fast-path-admin"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Routed:
    """An ASGI app that keeps the route each request was matched to."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.routes: list[Any] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[PRINCIPAL_KEY] = ADMIN  # (create_app's own authentication replaces it)
        await self.app(scope, receive, send)
        self.routes.append(scope.get("route"))


def router_only(gateway: Gateway) -> FastAPI:
    """The gateway's routes behind FastAPI's router alone, as they were served before."""
    app = FastAPI()
    app.state.gateway = gateway
    app.include_router(gateway_router)
    install_exception_handlers(app)
    return app


@pytest.fixture
async def apps() -> AsyncIterator[tuple[Routed, Routed]]:
    store = MemoryStore()
    gateway = Gateway(FakeEngine(), GatewayConfig())
    fast = create_app(store, admin_token=ADMIN_TOKEN, gateway=gateway, deadline_check=False)
    yield Routed(fast), Routed(router_only(gateway))


async def _answer(app: Routed, path: str, content: bytes) -> tuple[int, bytes]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        r = await client.post(path, content=content, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    return r.status_code, r.content


PATHS = [
    "/rollout/ro-404/attempt/at-1/v1/chat/completions",
    "/rollout/ro-404/attempt/at-1/v1/completions",
    "/rollout/ro-404/attempt/at-1/v1/responses",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("content", [b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}',
                                     b'{"model": "m", "prompt": "hi", "max_tokens": "lots"}', b"not json", b"[1]"])
async def test_a_model_call_gets_the_route_and_answer_the_router_gives(apps: tuple[Routed, Routed], path: str,
                                                                       content: bytes) -> None:
    fast, routed = apps
    assert await _answer(fast, path, content) == await _answer(routed, path, content)
    assert fast.routes[-1] is routed.routes[-1] is not None
    assert fast.routes[-1] in PROXY_ROUTES


def test_every_post_model_call_route_takes_the_fast_path() -> None:
    posts = {r.path for r in gateway_router.routes if "POST" in getattr(r, "methods", ()) and r.path.endswith(
        ("/chat/completions", "/completions", "/responses"))}
    assert {r.path for r in PROXY_ROUTES} == posts and len(posts) == 6


@pytest.fixture
def served() -> Iterator[str]:
    gateway = Gateway(FakeEngine(), GatewayConfig())
    with serve_in_thread(MemoryStore(), admin_token=ADMIN_TOKEN, gateway=gateway, max_body_bytes=1000) as url:
        yield url


def test_telemetry_reports_a_model_call_under_its_route_template(served: str) -> None:
    admin = httpx.Client(base_url=served, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30)
    admin.post("/v1/rollouts", json={"rollouts": [{"rollout_id": "ro-t"}]}).raise_for_status()
    claim = admin.post("/v1/claims", json={"worker_id": "w", "limit": 1}).json()[0]
    url = f"/rollout/ro-t/attempt/{claim['attempt']['attempt_id']}/v1/chat/completions"
    assert httpx.post(served + url, json=CHAT, headers={"Authorization": f"Bearer {claim['token']}"}).status_code == 200
    metrics = admin.get("/metrics").text
    admin.close()
    line = ('agentbolt_http_requests_total{method="POST",route="/rollout/{rollout_id}/attempt/{attempt_id}'
            '/v1/chat/completions",status="2xx"} 1.0')
    assert line in metrics


def test_a_chunked_model_call_over_the_body_limit_gets_the_413_other_routes_give(served: str) -> None:
    def chunked_post(path: str) -> httpx.Response:
        body = iter([b'{"pad": "' + b"x" * 600, b"x" * 600 + b'"}'])  # no Content-Length: chunked
        return httpx.post(served + path, content=body, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})

    model_call, store_call = chunked_post("/rollout/ro-x/attempt/at-x/v1/chat/completions"), chunked_post("/v1/spans")
    assert model_call.status_code == store_call.status_code == 413
    assert model_call.json() == store_call.json()
    assert model_call.json()["error"]["code"] == "payload_too_large"


async def test_other_requests_reach_the_router(apps: tuple[Routed, Routed]) -> None:
    fast, _ = apps
    transport = httpx.ASGITransport(app=fast)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        assert (await client.get("/v1/chat/completions", headers=headers)).status_code == 405
        assert (await client.post("/v1/chat/completions/", headers=headers, content=b"{}")).status_code in (307, 404)
        assert (await client.get("/healthz")).status_code == 200
