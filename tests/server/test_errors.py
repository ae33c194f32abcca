"""Every bad request is a 4xx with a JSON message — never a 500, and never a change to
the stored data. A real server over a MemoryStore."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator

import httpx
import pytest

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import StoreStats

ADMIN = "errors-admin"
LIMIT = 4096


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def api(store: MemoryStore) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(store, admin_token=ADMIN, max_body_bytes=LIMIT) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as client,
    ):
        yield client


@pytest.fixture
def seeded(api: httpx.Client, store: MemoryStore) -> dict[str, str]:
    """One claimed rollout with one span; returns its ids."""
    api.post("/v1/rollouts", json={"rollouts": [{"rollout_id": "r1"}, {"rollout_id": "r2"}]}).raise_for_status()
    (c,) = api.post("/v1/claims", json={"worker_id": "w", "limit": 1}).json()
    aid = c["attempt"]["attempt_id"]
    span = {"rollout_id": "r1", "attempt_id": aid, "span_id": "s0", "name": "first"}
    api.post("/v1/spans", json={"spans": [span]}).raise_for_status()
    return {"rollout_id": "r1", "attempt_id": aid}


def snapshot(store: MemoryStore) -> tuple[StoreStats, list[object]]:
    async def read() -> tuple[StoreStats, list[object]]:
        rollouts = (await store.query_rollouts(limit=1000)).items
        return await store.stats(), [r.model_dump() for r in rollouts]

    return asyncio.run(read())


def error_of(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return str(body["error"]["message"])


def test_malformed_json_is_400_and_changes_nothing(
    api: httpx.Client, store: MemoryStore, seeded: dict[str, str]
) -> None:
    before = snapshot(store)
    for path in ("/v1/rollouts", "/v1/spans", "/v1/claims", "/v1/batch", "/v1/resources"):
        message = error_of(
            api.post(path, content=b'{"rollouts": [', headers={"content-type": "application/json"}), 400, "invalid_json"
        )
        assert "malformed JSON" in message
    assert snapshot(store) == before


def test_wrong_types_are_422_with_pydantic_messages(
    api: httpx.Client, store: MemoryStore, seeded: dict[str, str]
) -> None:
    before = snapshot(store)
    r = api.post("/v1/rollouts", json={"rollouts": [{"mode": "bogus"}]})
    message = error_of(r, 422, "validation_error")
    assert "body.rollouts.0.mode" in message and "'train', 'val' or 'test'" in message
    assert r.json()["error"]["details"][0]["loc"] == ["body", "rollouts", 0, "mode"]

    error_of(api.post("/v1/rollouts", json={"rollouts": [{"input": 1, "surprise": True}]}), 422, "validation_error")
    error_of(api.get("/v1/rollouts", params={"limit": "lots"}), 422, "validation_error")
    error_of(api.get("/v1/rollouts", params={"limit": 0}), 422, "validation_error")
    error_of(api.get("/v1/resources/abc"), 422, "validation_error")
    error_of(api.post("/v1/claims", json={"limit": 100_000}), 422, "validation_error")
    error_of(api.post("/v1/rollouts/wait", json={"rollout_ids": ["r1"], "timeout": 31}), 422, "validation_error")
    error_of(api.post("/v1/batch", json={"ops": [{"op": "drop_tables", "args": {}}]}), 422, "validation_error")
    error_of(api.post("/v1/batch", json=[1, 2]), 422, "validation_error")
    spans_path = "/v1/spans"
    bad_span = {"rollout_id": "r1", "attempt_id": seeded["attempt_id"], "name": "x", "start_time": "yesterday"}
    error_of(api.post(spans_path, json={"spans": [bad_span]}), 422, "validation_error")
    assert snapshot(store) == before


def test_non_finite_or_ambiguous_rewards_are_422(api: httpx.Client, store: MemoryStore, seeded: dict[str, str]) -> None:
    before = snapshot(store)
    path = f"/v1/rollouts/r1/attempts/{seeded['attempt_id']}/reward"
    for raw in (b'{"value": NaN}', b'{"value": Infinity}', b'{"rewards": {"a": -Infinity}, "primary": "a"}'):
        error_of(api.post(path, content=raw, headers={"content-type": "application/json"}), 422, "validation_error")
    error_of(api.post(path, json={}), 422, "validation_error")
    error_of(api.post(path, json={"value": 1.0, "rewards": {"a": 1.0}}), 422, "validation_error")
    message = error_of(api.post(path, json={"rewards": {"a": 1.0, "b": 2.0}}), 422, "validation_error")
    assert "primary" in message
    error_of(api.post(path, json={"rewards": {"a": 1.0}, "primary": "b"}), 422, "validation_error")
    assert snapshot(store) == before


def test_unknown_ids_are_404(api: httpx.Client, store: MemoryStore, seeded: dict[str, str]) -> None:
    before = snapshot(store)
    aid = seeded["attempt_id"]
    error_of(api.get("/v1/rollouts/nope"), 404, "not_found")
    error_of(api.patch("/v1/rollouts/nope", json={"metadata": {"a": 1}}), 404, "not_found")
    error_of(api.post("/v1/rollouts/nope/cancel"), 404, "not_found")
    error_of(api.get("/v1/rollouts/nope/attempts"), 404, "not_found")
    error_of(api.get("/v1/rollouts/r1/attempts/at-nope"), 404, "not_found")
    error_of(api.get(f"/v1/rollouts/r2/attempts/{aid}"), 404, "not_found")
    error_of(api.post("/v1/rollouts/r1/attempts/at-nope/heartbeat"), 404, "not_found")
    error_of(api.post("/v1/rollouts/r1/attempts/at-nope/reward", json={"value": 1}), 404, "not_found")
    error_of(api.get("/v1/rollouts/nope/spans"), 404, "not_found")
    error_of(
        api.post("/v1/spans", json={"spans": [{"rollout_id": "nope", "attempt_id": aid, "name": "x"}]}),
        404,
        "not_found",
    )
    error_of(api.get("/v1/resources/7"), 404, "not_found")
    error_of(api.get("/v1/resources/latest"), 404, "not_found")
    error_of(api.get("/v1/workers/ghost"), 404, "not_found")
    error_of(api.post("/v1/rollouts/wait", json={"rollout_ids": ["r1", "ghost"], "timeout": 0}), 404, "not_found")
    assert snapshot(store) == before


def test_a_batch_of_spans_with_one_unknown_target_stores_none_of_them(
    api: httpx.Client, store: MemoryStore, seeded: dict[str, str]
) -> None:
    before = snapshot(store)
    good = {"rollout_id": "r1", "attempt_id": seeded["attempt_id"], "name": "good"}
    bad = {"rollout_id": "r1", "attempt_id": "at-nope", "name": "bad"}
    error_of(api.post("/v1/spans", json={"spans": [good, bad]}), 404, "not_found")
    assert snapshot(store) == before


def test_illegal_transitions_are_409(api: httpx.Client, store: MemoryStore, seeded: dict[str, str]) -> None:
    path = f"/v1/rollouts/r1/attempts/{seeded['attempt_id']}"
    api.patch(path, json={"status": "succeeded"}).raise_for_status()
    before = snapshot(store)
    error_of(api.patch(path, json={"status": "failed"}), 409, "invalid_transition")
    error_of(api.patch(path, json={"status": "preparing"}), 409, "invalid_transition")
    error_of(api.patch("/v1/rollouts/r2", json={"status": "running"}), 409, "invalid_transition")
    error_of(api.post("/v1/rollouts/r1/cancel"), 409, "invalid_transition")
    assert snapshot(store) == before


def test_bad_cursors_and_sort_keys_are_400(api: httpx.Client, store: MemoryStore, seeded: dict[str, str]) -> None:
    error_of(api.get("/v1/rollouts", params={"cursor": "not-a-cursor"}), 400, "invalid_request")
    error_of(api.get("/v1/rollouts", params={"sort_by": "password"}), 400, "invalid_request")
    error_of(api.get("/v1/rollouts/r1/spans", params={"cursor": "%%%"}), 400, "invalid_request")


def test_a_body_over_the_limit_is_413_by_content_length(api: httpx.Client, store: MemoryStore) -> None:
    before = snapshot(store)
    big = {"rollouts": [{"rollout_id": f"big-{i}", "input": "x" * 100} for i in range(100)]}
    message = error_of(api.post("/v1/rollouts", json=big), 413, "payload_too_large")
    assert str(LIMIT) in message
    assert snapshot(store) == before


def test_a_chunked_body_over_the_limit_is_413_while_streaming(api: httpx.Client, store: MemoryStore) -> None:
    before = snapshot(store)
    chunk = b" " * 1024

    def body() -> Iterator[bytes]:
        yield b'{"rollouts": [{"rollout_id": "sneaky"}]'
        for _ in range(LIMIT // len(chunk) + 2):
            yield chunk
        yield b"}"

    r = api.post("/v1/rollouts", content=body(), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers and r.request.headers["transfer-encoding"] == "chunked"
    error_of(r, 413, "payload_too_large")
    assert snapshot(store) == before


def test_a_chunked_body_under_the_limit_is_served(api: httpx.Client) -> None:
    def body() -> Iterator[bytes]:
        yield b'{"rollouts": '
        yield b'[{"rollout_id": "small"}]}'

    r = api.post("/v1/rollouts", content=body(), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text


def test_an_invalid_content_length_is_400(api: httpx.Client) -> None:
    url = httpx.URL(str(api.base_url))
    with socket.create_connection((url.host, url.port)) as sock:
        sock.sendall(
            b"POST /v1/rollouts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + ADMIN.encode()
            + b"\r\nContent-Length: 12abc\r\n\r\n{}"
        )
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 400"), head


def test_unknown_routes_and_methods_answer_json(api: httpx.Client) -> None:
    assert "/docs" in error_of(api.get("/v1/nothing-here"), 404, "not_found")
    message = error_of(api.delete("/v1/stats"), 405, "method_not_allowed")
    assert "DELETE" in message


def test_otlp_errors_are_4xx(api: httpx.Client, seeded: dict[str, str]) -> None:
    error_of(
        api.post("/v1/traces", content=b"\xff\x00garbage", headers={"content-type": "application/x-protobuf"}),
        400,
        "invalid_otlp",
    )
    error_of(
        api.post("/v1/traces", content=b"<xml/>", headers={"content-type": "text/xml"}), 415, "unsupported_media_type"
    )


class _BrokenStore(MemoryStore):
    async def stats(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")


def test_an_unexpected_exception_is_a_generic_500_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with serve_in_thread(_BrokenStore()) as url, caplog.at_level(logging.ERROR, logger="agentbolt.server"):
        r = httpx.get(f"{url}/v1/stats")
        assert r.status_code == 500
        assert r.json()["error"]["code"] == "internal_error"
        assert "disk on fire" not in r.text, "internals are not leaked to the caller"
        ok = httpx.get(f"{url}/healthz")
        assert ok.status_code == 200, "the server keeps serving"
    assert any("disk on fire" in (rec.exc_text or "") or "disk on fire" in str(rec.exc_info) for rec in caplog.records)
