"""``POST /v1/gateway/flush`` and :meth:`RemoteGateway.flush`: a reader of the gateway's
spans in another process waits on the span writer, however far behind it is, instead of
on a timer; admin only; documented; nothing to wait for on a server without a gateway."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence

import httpx
import pytest

from agentbolt.gateway import Gateway, GatewayConfig, RemoteGateway
from agentbolt.gateway.control import FLUSH_ROUTE
from agentbolt.server.app import create_app
from agentbolt.server.routes.gateway_admin import gateway_admin_router
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.errors import AuthenticationError, PermissionDeniedError
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Span
from gateway.conftest import ADMIN, GatewayWorld
from gateway.fakes import FakeEngine

WRITE_DELAY = 1.0
MESSAGES = [{"role": "user", "content": "hi"}]


class SlowSpanStore(MemoryStore):
    """Every write of spans takes ``WRITE_DELAY`` s: the gateway's writer is behind."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        await asyncio.sleep(WRITE_DELAY)
        self.writes += 1
        return await super().add_spans(spans)


@pytest.fixture
def slow() -> Iterator[GatewayWorld]:
    engine = FakeEngine()
    gateway = Gateway(engine, GatewayConfig(span_flush_interval=0.01))
    with serve_in_thread(SlowSpanStore(), admin_token=ADMIN, gateway=gateway) as url:
        world = GatewayWorld(url, engine, gateway)
        try:
            yield world
        finally:
            world.admin.close()


def _span_count(world: GatewayWorld, rollout_id: str) -> int:
    return len(world.admin.get(f"/v1/rollouts/{rollout_id}/spans").json()["items"])


async def test_a_remote_flush_returns_once_the_spans_of_finished_calls_are_readable(slow: GatewayWorld) -> None:
    a = slow.claim()
    with slow.client(a) as agent:
        for _ in range(2):
            agent.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).raise_for_status()
    assert _span_count(slow, a.rollout_id) == 0  # the writer is behind: nothing readable yet
    remote = RemoteGateway(slow.url, token=ADMIN)
    try:
        t0 = time.monotonic()
        await remote.flush()
        waited = time.monotonic() - t0
    finally:
        await remote.aclose()
    assert _span_count(slow, a.rollout_id) == 2
    assert waited > WRITE_DELAY / 4  # it waited on the writer, not returned at once
    assert (await asyncio.to_thread(slow.admin.get, "/v1/gateway/status")).json()["pending_spans"] == 0


def test_the_route_answers_the_status_with_nothing_pending(world: GatewayWorld) -> None:
    a = world.claim()
    with world.client(a) as agent:
        agent.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).raise_for_status()
    r = world.admin.post(FLUSH_ROUTE)
    assert r.status_code == 200
    assert r.json()["pending_spans"] == 0 and r.json()["calls"] == 1
    assert len(world.admin.get(f"/v1/rollouts/{a.rollout_id}/spans").json()["items"]) == 1


async def test_flushing_needs_the_admin_token(world: GatewayWorld) -> None:
    a = world.claim()
    scoped = httpx.post(world.url + FLUSH_ROUTE, headers={"Authorization": f"Bearer {a.token}"})
    assert scoped.status_code == 403 and "flushing the gateway's spans" in scoped.json()["error"]["message"]
    assert httpx.post(world.url + FLUSH_ROUTE).status_code == 401
    for token, error in ((a.token, PermissionDeniedError), (None, AuthenticationError)):
        remote = RemoteGateway(world.url, token=token)
        try:
            with pytest.raises(error):
                await remote.flush()
        finally:
            await remote.aclose()


def test_the_openapi_document_lists_the_flush_route(world: GatewayWorld) -> None:
    schema = httpx.get(world.url + "/openapi.json").json()
    op = schema["paths"][FLUSH_ROUTE]["post"]
    assert op["tags"] == ["gateway"] and "span" in op["summary"]


async def test_a_server_without_a_gateway_has_no_span_to_wait_for() -> None:
    with serve_in_thread(MemoryStore(), admin_token=ADMIN) as url:
        assert httpx.post(url + FLUSH_ROUTE, headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 404
        remote = RemoteGateway(url, token=ADMIN)
        try:
            await remote.flush()  # returns: no gateway, no span on its way
        finally:
            await remote.aclose()


def test_the_admin_routes_without_a_gateway_answer_in_their_own_shape() -> None:
    app = create_app(MemoryStore(), admin_token=ADMIN)
    app.include_router(gateway_admin_router)  # mounted by hand: create_app mounts it only with a gateway
    with serve_app_in_thread(app) as url:
        r = httpx.post(url + FLUSH_ROUTE, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "no_gateway" and r.json()["error"]["type"] == "invalid_request_error"
    assert "this server has no gateway" in r.json()["error"]["message"]
