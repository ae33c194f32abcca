"""A real server (uvicorn in a thread) with the gateway in front of a fake engine."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentbolt.engines import Engine
from agentbolt.gateway import Gateway, GatewayConfig, rollout_base_url
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from gateway.fakes import FakeEngine

ADMIN = "gw-admin-token"


@dataclass
class Attempt:
    rollout_id: str
    attempt_id: str
    token: str
    base_url: str


class GatewayWorld:
    """The server URL, an admin client, and helpers to claim attempts and read spans."""

    def __init__(self, url: str, engine: Engine, gateway: Gateway) -> None:
        self.url = url
        self.engine = engine
        self.gateway = gateway
        self.admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        self._n = 0

    def claim(self, mode: str = "train") -> Attempt:
        self._n += 1
        rid = f"ro-{mode}-{self._n}"
        self.admin.post("/v1/rollouts", json={"rollouts": [{"rollout_id": rid, "mode": mode}]}).raise_for_status()
        # claim until ours comes out (earlier tests may leave others queued: none here)
        claim = self.admin.post("/v1/claims", json={"worker_id": "w", "limit": 1}).json()[0]
        assert claim["rollout"]["rollout_id"] == rid
        aid = claim["attempt"]["attempt_id"]
        return Attempt(rid, aid, claim["token"], rollout_base_url(self.url, rid, aid))

    def client(self, attempt: Attempt) -> httpx.Client:
        return httpx.Client(base_url=attempt.base_url, headers={"Authorization": f"Bearer {attempt.token}"}, timeout=30)

    def spans(self, rollout_id: str, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The rollout's spans once there are ``n`` (spans are written in the background)."""
        deadline = time.monotonic() + timeout
        while True:
            items = self.admin.get(f"/v1/rollouts/{rollout_id}/spans").json()["items"]
            if len(items) >= n or time.monotonic() > deadline:
                assert len(items) == n, f"expected {n} span(s) for {rollout_id}, found {len(items)}"
                return items
            time.sleep(0.02)


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(sampling={"train": {"temperature": 1.0}, "val": {"temperature": 0.0}}, retry_backoff=0.01)


@contextlib.contextmanager
def serving(engine: Engine, config: GatewayConfig) -> Iterator[GatewayWorld]:
    """A server on a memory store with the gateway in front of ``engine``, as a world."""
    gateway = Gateway(engine, config)
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        w = GatewayWorld(url, engine, gateway)
        try:
            yield w
        finally:
            w.admin.close()


@pytest.fixture
def world(engine: FakeEngine, config: GatewayConfig) -> Iterator[GatewayWorld]:
    with serving(engine, config) as w:
        yield w
