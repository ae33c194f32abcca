"""The bad-input campaign: hostile payloads against a real server over SQLite and over
PostgreSQL. Each gets a clear 4xx (413 for size) or is stored intact — never a 5xx — and
what was stored before is still there afterwards. (PostgreSQL runs need a server at
127.0.0.1:5432; they are skipped without one.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.base import Store
from agentbolt.store.sqlite import SqliteStore
from tests.store.postgres_support import postgres_store

ADMIN = "bad-input-admin"
MAX_BODY = 2 * 2**20


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "store.db")
    return postgres_store()


@pytest.fixture
def api(backend: Store) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(backend, admin_token=ADMIN, max_body_bytes=MAX_BODY) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120) as client,
    ):
        yield client


@pytest.fixture
def seeded(api: httpx.Client) -> dict[str, str]:
    """One claimed rollout with one span: what must survive every bad request."""
    api.post("/v1/rollouts", json={"rollouts": [{"rollout_id": "r1", "input": {"q": "keep"}}]}).raise_for_status()
    (claim,) = api.post("/v1/claims", json={"worker_id": "w", "limit": 1}).json()
    ids = {"rollout_id": "r1", "attempt_id": claim["attempt"]["attempt_id"]}
    api.post("/v1/spans", json={"spans": [{**ids, "span_id": "s0", "name": "first"}]}).raise_for_status()
    return ids


def span(ids: dict[str, str], span_id: str, **fields: Any) -> dict[str, Any]:
    return {**ids, "span_id": span_id, "name": "step", **fields}


def spans_of(api: httpx.Client, rollout_id: str = "r1") -> dict[str, dict[str, Any]]:
    """Every span of the rollout (all pages), by span id."""
    out: dict[str, dict[str, Any]] = {}
    params: dict[str, Any] = {"limit": 5000}
    while True:
        page = api.get(f"/v1/rollouts/{rollout_id}/spans", params=params)
        assert page.status_code == 200, page.text
        body = page.json()
        out.update((s["span_id"], s) for s in body["items"])
        if body["next_cursor"] is None:
            return out
        params["cursor"] = body["next_cursor"]


def assert_clear_refusal(response: httpx.Response, *statuses: int) -> None:
    assert response.status_code in statuses, f"{response.status_code}: {response.text[:300]}"
    body = response.json()
    assert body["error"]["message"], "a refusal says why"


def assert_seed_intact(api: httpx.Client) -> None:
    rollout = api.get("/v1/rollouts/r1")
    assert rollout.status_code == 200 and rollout.json()["input"] == {"q": "keep"}
    assert spans_of(api)["s0"]["name"] == "first"


# ---------------------------------------------------------------------------- size
def test_an_oversized_span_is_refused_with_413(api: httpx.Client, seeded: dict[str, str]) -> None:
    huge = span(seeded, "huge", attributes={"completion": "x" * (MAX_BODY + 1)})

    response = api.post("/v1/spans", json={"spans": [huge]})

    assert_clear_refusal(response, 413)
    assert "huge" not in spans_of(api)
    assert_seed_intact(api)


def test_a_10000_span_batch_is_stored_intact(api: httpx.Client, seeded: dict[str, str]) -> None:
    batch = [span(seeded, f"b{i}", attributes={"i": i}) for i in range(10_000)]

    response = api.post("/v1/spans", json={"spans": batch})

    assert response.status_code == 200, response.text[:300]
    stored = spans_of(api)
    assert len(stored) == 10_001
    assert all(stored[f"b{i}"]["attributes"] == {"i": i} for i in range(10_000))
    assert_seed_intact(api)


# ---------------------------------------------------------------------------- encoding
@pytest.mark.parametrize(
    "body",
    [
        b'{"spans": [{"rollout_id": "r1", "attempt_id": "a", "name": "\xff\xfe"}]}',
        b'{"spans": [{"rollout_id": "r1", "attempt_id": "a", "name": "\xed\xa0\x80"}]}',  # a lone surrogate
        b'{"spans": [{"rollout_id": "r1", "attempt_id": "a", "name": "\\ud800"}]}',  # escaped lone surrogate
    ],
    ids=["invalid-bytes", "surrogate-bytes", "surrogate-escape"],
)
def test_invalid_utf8_is_refused_with_a_4xx(api: httpx.Client, seeded: dict[str, str], body: bytes) -> None:
    body = body.replace(b'"a"', f'"{seeded["attempt_id"]}"'.encode())

    response = api.post("/v1/spans", content=body, headers={"content-type": "application/json"})

    assert_clear_refusal(response, 400, 422)
    assert_seed_intact(api)


def test_nul_characters_are_stored_intact_or_refused_clearly(api: httpx.Client, seeded: dict[str, str]) -> None:
    attrs = {"completion": "before\x00after", "key\x00with nul": ["\x00"]}
    response = api.post("/v1/spans", json={"spans": [span(seeded, "nul", attributes=attrs)]})
    assert response.status_code == 200, response.text[:300]
    assert spans_of(api)["nul"]["attributes"] == attrs, "span attributes keep their NUL characters"

    enq = api.post("/v1/rollouts", json={"rollouts": [{"rollout_id": "r-nul", "input": {"q": "a\x00b"}}]})
    assert enq.status_code == 200, enq.text[:300]
    assert api.get("/v1/rollouts/r-nul").json()["input"] == {"q": "a\x00b"}

    # in identifiers and names PostgreSQL text cannot hold a NUL: intact or a clear 4xx
    for path, payload in [
        ("/v1/rollouts", {"rollouts": [{"rollout_id": "id\x00nul"}]}),
        ("/v1/spans", {"spans": [span(seeded, "n2", name="name\x00nul")]}),
        ("/v1/claims", {"worker_id": "worker\x00nul", "limit": 1}),
    ]:
        r = api.post(path, json=payload)
        assert r.status_code < 500, f"{path}: {r.status_code} {r.text[:300]}"
        if r.status_code >= 400:
            assert_clear_refusal(r, 400, 422)
    name = spans_of(api).get("n2", {}).get("name")
    assert name in (None, "name\x00nul")
    assert_seed_intact(api)


# ---------------------------------------------------------------------------- structure
def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [10_000, 200])
def test_deeply_nested_json_is_refused_or_stored_intact(api: httpx.Client, seeded: dict[str, str], depth: int) -> None:
    body = '{"spans": [{"rollout_id": "r1", "attempt_id": "%s", "span_id": "deep", "name": "n", "attributes": %s}]}'
    response = api.post(
        "/v1/spans",
        content=body % (seeded["attempt_id"], nested(depth)),
        headers={"content-type": "application/json"},
    )

    assert response.status_code < 500, response.text[:300]
    if response.status_code == 200:
        stored = spans_of(api)["deep"]["attributes"]
        for _ in range(depth - 1):
            stored = stored["a"]
        assert stored == {"a": 1}, "stored intact, to the last level"
    else:
        assert_clear_refusal(response, 400, 413, 422)
        assert "deep" not in spans_of(api)
    assert_seed_intact(api)


def test_the_store_answers_normally_after_the_whole_campaign(
    api: httpx.Client, seeded: dict[str, str], backend: Store
) -> None:
    hostile = [
        b"\xff" * 100,
        b'{"spans": ' + b"[" * 5000,
        b'{"spans": [{"rollout_id": 1e999}]}',
        b'{"rollouts": [{"rollout_id": "' + b"x" * 1000 + b'"}]}',
    ]
    for body in hostile:
        for path in ("/v1/spans", "/v1/rollouts", "/v1/claims", "/v1/batch"):
            r = api.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code < 500, f"{path}: {r.status_code} {r.text[:300]}"

    assert_seed_intact(api)
    stats = api.get("/v1/stats").json()
    assert stats["total_rollouts"] == 1 and stats["total_spans"] == 1
    asyncio.run(_check_direct(backend))


async def _check_direct(store: Store) -> None:
    """The store itself (not only the HTTP layer) still holds the seed."""
    assert (await store.get_rollout("r1")).input == {"q": "keep"}
