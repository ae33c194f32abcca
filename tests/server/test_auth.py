"""Authentication and least privilege (acceptance criteria).

The admin token drives the store. A claim returns a token scoped to its rollout
attempt: it can read that rollout and report that attempt's spans, reward and
heartbeat — nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentbolt import semconv
from agentbolt.server import run_server
from agentbolt.server.auth import TokenScope, mint_scoped_token, verify_token
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.errors import PermissionDeniedError
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import Span

ADMIN = "s3cret-admin"


class World:
    """A server with two claimed rollouts (``mine`` and ``other``) and their tokens."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        self.admin.post(
            "/v1/rollouts",
            json={"rollouts": [{"rollout_id": "mine"}, {"rollout_id": "other"}, {"rollout_id": "queued"}]},
        ).raise_for_status()
        claims = self.admin.post("/v1/claims", json={"worker_id": "w", "limit": 2}).json()
        by_id = {c["rollout"]["rollout_id"]: c for c in claims}
        self.aid = by_id["mine"]["attempt"]["attempt_id"]
        self.other_aid = by_id["other"]["attempt"]["attempt_id"]
        self.token = by_id["mine"]["token"]
        self.scoped = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)

    def close(self) -> None:
        self.admin.close()
        self.scoped.close()


@contextlib.contextmanager
def serve_world() -> Iterator[World]:
    with serve_in_thread(MemoryStore(), admin_token=ADMIN) as url:
        w = World(url)
        try:
            yield w
        finally:
            w.close()


@pytest.fixture
def world() -> Iterator[World]:
    """A fresh world per test, for tests that write."""
    with serve_world() as w:
        yield w


@pytest.fixture(scope="module")
def shared() -> Iterator[World]:
    """One world for the tests that only read or get refused."""
    with serve_world() as w:
        yield w


def span(rid: str, aid: str, name: str = "step", **fields: Any) -> dict[str, Any]:
    return {"rollout_id": rid, "attempt_id": aid, "name": name, **fields}


def forbidden(response: httpx.Response) -> str:
    assert response.status_code == 403, (
        f"{response.request.method} {response.request.url}: {response.status_code} {response.text}"
    )
    error = response.json()["error"]
    assert error["code"] == "forbidden"
    return str(error["message"])


# ---------------------------------------------------------------------------- admin token
STORE_ROUTES = [
    ("GET", "/v1/rollouts"),
    ("POST", "/v1/rollouts"),
    ("GET", "/v1/rollouts/mine"),
    ("POST", "/v1/claims"),
    ("GET", "/v1/rollouts/mine/spans"),
    ("POST", "/v1/spans"),
    ("POST", "/v1/batch"),
    ("GET", "/v1/resources"),
    ("GET", "/v1/stats"),
    ("GET", "/v1/workers"),
    ("POST", "/v1/traces"),
    ("GET", "/metrics"),
]


@pytest.mark.parametrize(("method", "path"), STORE_ROUTES)
def test_store_routes_need_a_token(shared: World, method: str, path: str) -> None:
    r = httpx.request(method, shared.url + path, json={})
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path"), STORE_ROUTES)
def test_a_wrong_token_is_refused(shared: World, method: str, path: str) -> None:
    r = httpx.request(method, shared.url + path, json={}, headers={"Authorization": "Bearer s3cret-admiN"})
    assert "invalid token" in forbidden(r)


def test_a_non_bearer_authorization_is_refused(shared: World) -> None:
    r = httpx.get(shared.url + "/v1/stats", headers={"Authorization": f"Basic {ADMIN}"})
    assert r.status_code == 401 and "Bearer" in r.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/healthz", "/openapi.json", "/docs"])
def test_health_and_docs_are_public(shared: World, path: str) -> None:
    assert httpx.get(shared.url + path).status_code == 200


def test_the_admin_token_drives_everything(world: World) -> None:
    assert world.admin.get("/v1/stats").json()["total_rollouts"] == 3
    assert world.admin.post("/v1/resources", json={"resources": {}}).status_code == 200


def test_the_openapi_schema_declares_bearer_auth(shared: World) -> None:
    schema = httpx.get(shared.url + "/openapi.json").json()
    assert any(s.get("scheme") == "bearer" for s in schema["components"]["securitySchemes"].values())


# ---------------------------------------------------------------------------- scoped tokens: allowed
def test_a_scoped_token_reads_its_own_rollout_attempts_and_spans(world: World) -> None:
    s = world.scoped
    assert s.get("/v1/rollouts/mine").json()["rollout_id"] == "mine"
    assert [a["attempt_id"] for a in s.get("/v1/rollouts/mine/attempts").json()] == [world.aid]
    assert s.get(f"/v1/rollouts/mine/attempts/{world.aid}").json()["status"] == "preparing"
    assert s.get("/v1/rollouts/mine/spans").json() == {"items": [], "next_cursor": None}


def test_a_scoped_token_posts_its_own_spans_reward_and_heartbeat(world: World) -> None:
    s = world.scoped
    stored = s.post(
        "/v1/spans", json={"spans": [span("mine", world.aid, span_id="a"), span("mine", world.aid, span_id="b")]}
    )
    assert stored.status_code == 200 and [x["span_id"] for x in stored.json()] == ["a", "b"]
    assert s.post(f"/v1/rollouts/mine/attempts/{world.aid}/heartbeat").json()["status"] == "running"
    reward = s.post(f"/v1/rollouts/mine/attempts/{world.aid}/reward", json={"value": 0.5})
    assert reward.status_code == 200 and reward.json()["name"] == semconv.REWARD_SPAN
    assert world.admin.get("/v1/rollouts/mine").json()["reward"] == 0.5


def _otlp_json(attributes: dict[str, str] | None = None) -> bytes:
    attrs = [{"key": k, "value": {"stringValue": v}} for k, v in (attributes or {}).items()]
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [
                    {
                        "scope": {"name": "agent"},
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "name": "llm.call",
                                "kind": 3,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000001000000000",
                                "attributes": attrs,
                            }
                        ],
                    }
                ],
            }
        ]
    }
    return json.dumps(doc).encode()


def test_a_scoped_token_sends_otlp_traces_attributed_to_its_attempt(world: World) -> None:
    body = gzip.compress(_otlp_json())
    r = world.scoped.post(
        "/v1/traces", content=body, headers={"content-type": "application/json", "content-encoding": "gzip"}
    )
    assert r.status_code == 200, r.text
    assert r.json() == {}
    (stored,) = world.admin.get("/v1/rollouts/mine/spans").json()["items"]
    assert (stored["name"], stored["attempt_id"]) == ("llm.call", world.aid)


# ---------------------------------------------------------------------------- scoped tokens: refused
def test_a_scoped_token_cannot_touch_another_rollout(world: World) -> None:
    s, other = world.scoped, world.other_aid
    message = forbidden(s.get("/v1/rollouts/other"))
    assert "'mine'" in message and world.aid in message, "the refusal says what the token is scoped to"
    forbidden(s.get("/v1/rollouts/other/attempts"))
    forbidden(s.get(f"/v1/rollouts/other/attempts/{other}"))
    forbidden(s.get("/v1/rollouts/other/spans"))
    forbidden(s.post("/v1/spans", json={"spans": [span("other", other)]}))
    forbidden(s.post("/v1/spans", json={"spans": [span("mine", world.aid), span("other", other)]}))
    forbidden(s.post(f"/v1/rollouts/other/attempts/{other}/heartbeat"))
    forbidden(s.post(f"/v1/rollouts/other/attempts/{other}/reward", json={"value": 1.0}))
    forbidden(s.post(f"/v1/rollouts/mine/attempts/{other}/reward", json={"value": 1.0}))
    forbidden(
        s.post(
            "/v1/traces",
            content=_otlp_json({semconv.ROLLOUT_ID: "other", semconv.ATTEMPT_ID: other}),
            headers={"content-type": "application/json"},
        )
    )
    assert world.admin.get("/v1/rollouts/other/spans").json()["items"] == [], "nothing was written"
    assert world.admin.get("/v1/rollouts/mine/spans").json()["items"] == []


def test_a_scoped_token_cannot_drive_the_store(world: World) -> None:
    s = world.scoped
    forbidden(s.post("/v1/rollouts", json={"rollouts": [{"rollout_id": "sneaky"}]}))
    forbidden(s.post("/v1/claims", json={"worker_id": "w"}))
    forbidden(s.get("/v1/rollouts"))
    forbidden(s.post("/v1/rollouts/query", json={}))
    forbidden(s.post("/v1/rollouts/wait", json={"rollout_ids": ["mine"], "timeout": 0}))
    forbidden(s.patch("/v1/rollouts/mine", json={"metadata": {"a": 1}}))
    forbidden(s.post("/v1/rollouts/mine/cancel"))
    forbidden(s.patch(f"/v1/rollouts/mine/attempts/{world.aid}", json={"status": "succeeded"}))
    forbidden(s.post("/v1/resources", json={"resources": {}}))
    forbidden(s.patch("/v1/resources", json={"resources": {}}))
    forbidden(s.get("/v1/resources"))
    forbidden(s.get("/v1/resources/latest"))
    forbidden(
        s.post(
            "/v1/batch", json={"ops": [{"op": "heartbeat", "args": {"rollout_id": "mine", "attempt_id": world.aid}}]}
        )
    )
    forbidden(s.get("/v1/stats"))
    forbidden(s.post("/v1/deadlines/check"))
    forbidden(s.get("/v1/workers"))
    forbidden(s.post("/v1/workers/w", json={}))
    forbidden(s.get("/metrics"))
    stats = world.admin.get("/v1/stats").json()
    assert stats["total_rollouts"] == 3 and stats["queue_depth"] == 1 and stats["latest_resources_version"] is None
    assert world.admin.get("/v1/rollouts/mine").json()["metadata"] == {}


def test_a_tampered_or_foreign_token_is_refused(shared: World) -> None:
    prefix, rid, aid, sig = shared.token.split(".")
    other_rid = mint_scoped_token(b"x" * 32, "other", shared.other_aid).split(".")[1]
    for token in (
        f"{prefix}.{other_rid}.{aid}.{sig}",  # someone else's rollout with my signature
        f"{prefix}.{rid}.{aid}.{sig[:-2]}AA",  # a forged signature
        mint_scoped_token(b"another store's secret", "mine", shared.aid),
        "ab1.garbage",
    ):
        r = httpx.get(shared.url + "/v1/rollouts/mine", headers={"Authorization": f"Bearer {token}"})
        forbidden(r)


# ---------------------------------------------------------------------------- tokens themselves
def test_tokens_round_trip_and_reject_anything_else() -> None:
    secret = b"k" * 32
    token = mint_scoped_token(secret, "ro/1 ünï", "at-2")
    assert token.startswith("ab1.") and token.count(".") == 3
    assert verify_token(secret, token) == TokenScope("ro/1 ünï", "at-2")
    assert verify_token(b"j" * 32, token) is None
    for junk in ("", "ab1", "ab1.a.b", "ab2" + token[3:], token + "x", "ab1.!!.??.**", token.replace(".", "..", 1)):
        assert verify_token(secret, junk) is None


def test_scoped_tokens_survive_a_server_restart_on_the_same_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with serve_in_thread(SqliteStore(db), admin_token=ADMIN) as url:
        admin = {"Authorization": f"Bearer {ADMIN}"}
        httpx.post(url + "/v1/rollouts", json={"rollouts": [{"rollout_id": "r1"}]}, headers=admin).raise_for_status()
        (claim,) = httpx.post(url + "/v1/claims", json={"worker_id": "w"}, headers=admin).json()
    token, aid = claim["token"], claim["attempt"]["attempt_id"]

    with serve_in_thread(SqliteStore(db), admin_token=ADMIN) as url:
        scoped = {"Authorization": f"Bearer {token}"}
        r = httpx.post(url + "/v1/spans", json={"spans": [span("r1", aid, "after-restart")]}, headers=scoped)
        assert r.status_code == 200, r.text
        assert httpx.get(url + "/v1/rollouts/r1", headers=scoped).json()["status"] == "running"


# ---------------------------------------------------------------------------- no admin token
def test_without_an_admin_token_the_api_is_open_but_scoped_tokens_stay_scoped() -> None:
    with serve_in_thread(MemoryStore()) as url:
        httpx.post(
            url + "/v1/rollouts", json={"rollouts": [{"rollout_id": "a"}, {"rollout_id": "b"}]}
        ).raise_for_status()
        claims = httpx.post(url + "/v1/claims", json={"limit": 2}).json()
        assert all(c["token"] for c in claims), "claims mint scoped tokens even on an open server"
        scoped = {"Authorization": f"Bearer {claims[0]['token']}"}
        mine, theirs = claims[0]["rollout"]["rollout_id"], claims[1]["rollout"]["rollout_id"]
        assert httpx.get(f"{url}/v1/rollouts/{mine}", headers=scoped).status_code == 200
        forbidden(httpx.get(f"{url}/v1/rollouts/{theirs}", headers=scoped))
        message = forbidden(httpx.get(url + "/v1/stats", headers={"Authorization": "Bearer whatever"}))
        assert "no admin token" in message


def test_run_server_refuses_a_public_address_without_an_admin_token() -> None:
    with pytest.raises(
        ValueError, match=r"no admin token: refusing to listen on 0\.0\.0\.0; pass --admin-token or bind 127\.0\.0\.1"
    ):
        run_server("memory://", host="0.0.0.0")


# ---------------------------------------------------------------------------- the HTTP client with a scoped token
async def test_http_store_with_a_scoped_token_does_an_agents_work(world: World) -> None:
    store = HttpStore(world.url, token=world.token)
    assert store.batching is False, "scoped tokens cannot use /v1/batch"
    try:
        spans = await asyncio.gather(
            *(store.add_spans([Span(rollout_id="mine", attempt_id=world.aid, name=f"s{i}")]) for i in range(5))
        )
        assert sorted(s[0].name for s in spans) == [f"s{i}" for i in range(5)]
        assert (await store.heartbeat("mine", world.aid)).status == "running"
        assert (await store.get_rollout("mine")).rollout_id == "mine"
        with pytest.raises(PermissionDeniedError, match="scoped to rollout 'mine'"):
            await store.enqueue_rollout("more work")
        with pytest.raises(PermissionDeniedError, match="scoped to rollout 'mine'"):
            await store.get_rollout("other")
    finally:
        await store.close()
