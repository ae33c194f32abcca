"""The HTTP API, route by route: each maps to one Store method and answers with the
store's own types. A real server (uvicorn in a thread) over a MemoryStore."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

import agentbolt
from agentbolt import semconv
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore

ADMIN = "api-admin"


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore(deadline_check_interval=0.02)


@pytest.fixture
def api(store: MemoryStore) -> Iterator[httpx.Client]:
    with (
        serve_in_thread(store, admin_token=ADMIN) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as client,
    ):
        yield client


def ok(response: httpx.Response) -> object:
    assert response.status_code == 200, response.text
    return response.json()


def enqueue(api: httpx.Client, *specs: dict) -> list[dict]:
    return ok(api.post("/v1/rollouts", json={"rollouts": list(specs)}))  # type: ignore[return-value]


def claim(api: httpx.Client, worker: str = "w1", limit: int = 1) -> list[dict]:
    return ok(api.post("/v1/claims", json={"worker_id": worker, "limit": limit}))  # type: ignore[return-value]


# ---------------------------------------------------------------------------- service
def test_healthz_names_the_backend_and_version_without_a_token(api: httpx.Client) -> None:
    r = httpx.get(api.base_url.join("/healthz"))
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "store": "MemoryStore", "version": agentbolt.__version__}


def test_openapi_documents_every_route_with_summary_tag_and_typed_answer(api: httpx.Client) -> None:
    schema = httpx.get(api.base_url.join("/openapi.json")).json()
    routes = {(path, method.upper()) for path, item in schema["paths"].items() for method in item}
    expected = {
        ("/v1/rollouts", "POST"),
        ("/v1/rollouts", "GET"),
        ("/v1/rollouts/query", "POST"),
        ("/v1/rollouts/wait", "POST"),
        ("/v1/rollouts/{rollout_id}", "GET"),
        ("/v1/rollouts/{rollout_id}", "PATCH"),
        ("/v1/rollouts/{rollout_id}/cancel", "POST"),
        ("/v1/claims", "POST"),
        ("/v1/rollouts/{rollout_id}/attempts", "GET"),
        ("/v1/rollouts/{rollout_id}/attempts/{attempt_id}", "GET"),
        ("/v1/rollouts/{rollout_id}/attempts/{attempt_id}", "PATCH"),
        ("/v1/rollouts/{rollout_id}/attempts/{attempt_id}/heartbeat", "POST"),
        ("/v1/rollouts/{rollout_id}/attempts/{attempt_id}/report-and-claim", "POST"),
        ("/v1/rollouts/{rollout_id}/attempts/{attempt_id}/reward", "POST"),
        ("/v1/spans", "POST"),
        ("/v1/rollouts/{rollout_id}/spans", "GET"),
        ("/v1/resources", "POST"),
        ("/v1/resources", "PATCH"),
        ("/v1/resources", "GET"),
        ("/v1/resources/latest", "GET"),
        ("/v1/resources/{version}", "GET"),
        ("/v1/workers/{worker_id}", "POST"),
        ("/v1/workers", "GET"),
        ("/v1/workers/{worker_id}", "GET"),
        ("/v1/stats", "GET"),
        ("/v1/deadlines/check", "POST"),
        ("/v1/batch", "POST"),
        ("/v1/traces", "POST"),
        ("/metrics", "GET"),
        ("/healthz", "GET"),
    }
    assert expected <= routes
    for path, item in schema["paths"].items():
        for method, op in item.items():
            assert op.get("summary"), f"{method} {path} has no summary"
            assert op.get("tags"), f"{method} {path} has no tag"
    get_rollout = schema["paths"]["/v1/rollouts/{rollout_id}"]["get"]["responses"]
    assert get_rollout["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Rollout"}
    assert get_rollout["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorResponse"}
    batch_body = schema["paths"]["/v1/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert batch_body == {"$ref": "#/components/schemas/TypedBatchRequest"}
    assert "TypedBatchRequest" in schema["components"]["schemas"]
    assert "AddSpansOp" in schema["components"]["schemas"]


# ---------------------------------------------------------------------------- rollouts
def test_enqueue_get_and_list_rollouts(api: httpx.Client) -> None:
    made = enqueue(api, {"input": {"q": 1}, "rollout_id": "r1", "mode": "val"}, {"input": {"q": 2}})
    assert [r["status"] for r in made] == ["queuing", "queuing"]
    assert made[0]["rollout_id"] == "r1" and made[1]["rollout_id"].startswith("ro-")

    assert ok(api.get("/v1/rollouts/r1"))["input"] == {"q": 1}
    page = ok(api.get("/v1/rollouts", params={"mode": "val"}))
    assert [r["rollout_id"] for r in page["items"]] == ["r1"] and page["next_cursor"] is None
    both = ok(api.get("/v1/rollouts", params=[("rollout_id", "r1"), ("rollout_id", made[1]["rollout_id"])]))
    assert len(both["items"]) == 2
    by_body = ok(api.post("/v1/rollouts/query", json={"rollout_ids": ["r1"], "status": ["queuing"]}))
    assert [r["rollout_id"] for r in by_body["items"]] == ["r1"]

    again = enqueue(api, {"input": {"q": "other"}, "rollout_id": "r1"})
    assert again[0]["input"] == {"q": 1}, "re-enqueueing an id returns the stored rollout"


def test_rollout_pages_follow_the_cursor_without_gaps_or_repeats(api: httpx.Client) -> None:
    enqueue(api, *({"rollout_id": f"p{i}"} for i in range(7)))
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, object] = {"limit": 3, "sort_by": "rollout_id", "descending": True}
        if cursor:
            params["cursor"] = cursor
        page = ok(api.get("/v1/rollouts", params=params))
        seen += [r["rollout_id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"p{i}" for i in reversed(range(7))]


def test_patch_merges_metadata_and_cancel_ends_a_rollout(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1", "metadata": {"a": 1}})
    patched = ok(api.patch("/v1/rollouts/r1", json={"metadata": {"b": 2}}))
    assert patched["metadata"] == {"a": 1, "b": 2}
    cancelled = ok(api.post("/v1/rollouts/r1/cancel"))
    assert cancelled["status"] == "cancelled"
    assert ok(api.post("/v1/rollouts/r1/cancel"))["status"] == "cancelled", "cancelling twice is fine"
    enqueue(api, {"rollout_id": "r2"})
    assert ok(api.patch("/v1/rollouts/r2", json={"status": "cancelled"}))["status"] == "cancelled"


def test_rollout_ids_with_slashes_dots_and_spaces_are_addressable(api: httpx.Client) -> None:
    odd = "gsm8k/train/42 ?#%.."
    enqueue(api, {"rollout_id": odd})
    quoted = "/v1/rollouts/" + quote(odd, safe="/")
    assert ok(api.get(quoted))["rollout_id"] == odd
    (c,) = claim(api)
    spans = ok(api.get(quoted + "/spans"))
    assert spans == {"items": [], "next_cursor": None}
    assert ok(api.get(quoted + "/attempts"))[0]["attempt_id"] == c["attempt"]["attempt_id"]


def test_wait_long_polls_until_rollouts_finish(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "w1"}, {"rollout_id": "w2"})
    claims = claim(api, limit=2)

    t0 = time.monotonic()
    none_yet = ok(api.post("/v1/rollouts/wait", json={"rollout_ids": ["w1", "w2"], "timeout": 0.2}))
    assert none_yet == [] and 0.15 < time.monotonic() - t0 < 5

    def finish_later() -> None:
        time.sleep(0.2)
        with httpx.Client(base_url=api.base_url, headers=api.headers) as other:
            for c in claims:
                path = f"/v1/rollouts/{c['rollout']['rollout_id']}/attempts/{c['attempt']['attempt_id']}"
                other.patch(path, json={"status": "succeeded"}).raise_for_status()

    threading.Thread(target=finish_later).start()
    t0 = time.monotonic()
    done = ok(api.post("/v1/rollouts/wait", json={"rollout_ids": ["w2", "w1"], "timeout": 20}))
    assert [r["rollout_id"] for r in done] == ["w2", "w1"]
    assert all(r["status"] == "succeeded" for r in done)
    assert time.monotonic() - t0 < 10, "the long-poll answers as soon as they finish"


# ---------------------------------------------------------------------------- claims & attempts
def test_claim_heartbeat_and_finish_an_attempt(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1"})
    (c,) = claim(api, "worker-a")
    assert c["rollout"]["status"] == "preparing" and c["attempt"]["worker_id"] == "worker-a"
    assert c["token"].startswith("ab1.")
    assert claim(api) == [], "nothing left to claim"

    base = f"/v1/rollouts/r1/attempts/{c['attempt']['attempt_id']}"
    assert ok(api.post(base + "/heartbeat"))["status"] == "running"
    assert ok(api.get(base))["status"] == "running"
    assert [a["sequence_id"] for a in ok(api.get("/v1/rollouts/r1/attempts"))] == [1]
    done = ok(api.patch(base, json={"status": "succeeded", "metadata": {"k": "v"}}))
    assert done["status"] == "succeeded" and done["metadata"] == {"k": "v"}
    assert ok(api.get("/v1/rollouts/r1"))["status"] == "succeeded"


def test_claims_are_idempotent_by_request_id(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1"}, {"rollout_id": "r2"})
    first = ok(api.post("/v1/claims", json={"worker_id": "w", "limit": 1, "request_id": "req-1"}))
    again = ok(api.post("/v1/claims", json={"worker_id": "w", "limit": 1, "request_id": "req-1"}))
    assert [c["attempt"]["attempt_id"] for c in again] == [c["attempt"]["attempt_id"] for c in first]
    assert ok(api.get("/v1/stats"))["queue_depth"] == 1


def test_report_and_claim_finishes_an_attempt_and_hands_out_the_next_with_its_token(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1"}, {"rollout_id": "r2"})
    (c,) = claim(api, "w")
    path = f"/v1/rollouts/r1/attempts/{c['attempt']['attempt_id']}/report-and-claim"
    body = {"status": "succeeded", "worker_id": "w", "limit": 1, "request_id": "next-1"}

    done = ok(api.post(path, json=body))
    again = ok(api.post(path, json=body))

    assert done["attempt"]["status"] == "succeeded"
    assert [x["rollout"]["rollout_id"] for x in done["claims"]] == ["r2"]
    assert done["claims"][0]["token"].startswith("ab1.")
    assert again["claims"][0]["attempt"] == done["claims"][0]["attempt"], "the same request id: the same claim"
    assert ok(api.get("/v1/rollouts/r1"))["status"] == "succeeded"
    scoped = {"Authorization": f"Bearer {done['claims'][0]['token']}"}
    refused = api.post(path.replace("r1", "r2").replace(c["attempt"]["attempt_id"], done["claims"][0]["attempt"]
                                                        ["attempt_id"]), json=body, headers=scoped)
    assert refused.status_code == 403, "reporting an outcome is the runner's (admin's) job"
    bad = api.post(path, json={**body, "limit": 0})
    assert bad.status_code == 422


def test_report_and_claim_in_a_batch_answers_the_attempt_and_signed_claims(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1"}, {"rollout_id": "r2"})
    (c,) = claim(api, "w")
    aid = c["attempt"]["attempt_id"]
    ops = [
        {"op": "report_and_claim", "args": {"rollout_id": "r1", "attempt_id": aid, "status": "succeeded",
                                            "worker_id": "w"}},
        {"op": "report_and_claim", "args": {"rollout_id": "r1", "attempt_id": "nope", "status": "succeeded"}},
    ]
    results = ok(api.post("/v1/batch", json={"ops": ops}))["results"]
    assert results[0]["ok"] and results[0]["result"]["attempt"]["status"] == "succeeded"
    (nxt,) = results[0]["result"]["claims"]
    assert nxt["rollout"]["rollout_id"] == "r2" and nxt["token"].startswith("ab1.")
    assert results[1] == {"ok": False, "status": 404, "error": results[1]["error"]}


def test_reward_route_stores_a_reward_span_and_sets_the_rollout_reward(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1"})
    (c,) = claim(api)
    base = f"/v1/rollouts/r1/attempts/{c['attempt']['attempt_id']}/reward"
    span = ok(api.post(base, json={"value": 0.25, "span_id": "rw-1"}))
    assert span["name"] == semconv.REWARD_SPAN
    assert span["attributes"] == semconv.reward_span_attributes({"reward": 0.25}, "reward")
    assert ok(api.get("/v1/rollouts/r1"))["reward"] == 0.25

    named = ok(api.post(base, json={"rewards": {"acc": 1.0, "cost": -0.5}, "primary": "acc"}))
    assert named["attributes"][semconv.REWARD_VALUE] == 1.0
    assert named["attributes"][semconv.REWARD_PREFIX + "cost"] == -0.5
    assert ok(api.get("/v1/rollouts/r1"))["reward"] == 1.0
    resent = ok(api.post(base, json={"value": 0.25, "span_id": "rw-1"}))
    assert resent["sequence_id"] == span["sequence_id"], "the same span id is stored once"


# ---------------------------------------------------------------------------- spans
def test_spans_are_stored_once_and_listed_by_attempt_name_and_page(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1"})
    (c,) = claim(api)
    aid = c["attempt"]["attempt_id"]
    spans = [
        {"rollout_id": "r1", "attempt_id": aid, "span_id": f"s{i}", "name": "llm" if i % 2 else "tool"}
        for i in range(5)
    ]
    stored = ok(api.post("/v1/spans", json={"spans": spans}))
    assert [s["sequence_id"] for s in stored] == [0, 1, 2, 3, 4]
    assert ok(api.post("/v1/spans", json={"spans": spans[:2]})) == stored[:2], "re-sent spans are not stored twice"

    latest = ok(api.get("/v1/rollouts/r1/spans", params={"attempt_id": "latest", "name": "llm"}))
    assert [s["span_id"] for s in latest["items"]] == ["s1", "s3"]
    first = ok(api.get("/v1/rollouts/r1/spans", params={"limit": 3}))
    rest = ok(api.get("/v1/rollouts/r1/spans", params={"limit": 3, "cursor": first["next_cursor"]}))
    assert [s["span_id"] for s in first["items"] + rest["items"]] == [f"s{i}" for i in range(5)]
    assert rest["next_cursor"] is None
    assert ok(api.get(f"/v1/rollouts/r1/attempts/{aid}"))["status"] == "running", "a span is a sign of life"


# ---------------------------------------------------------------------------- resources, workers, stats
def test_resources_publish_merge_list_and_read(api: httpx.Client) -> None:
    assert api.get("/v1/resources/latest").status_code == 404
    v1 = ok(
        api.post(
            "/v1/resources", json={"resources": {"prompt": {"resource_type": "prompt_template", "template": "Hi {x}"}}}
        )
    )
    assert v1["version"] == 1
    v2 = ok(
        api.patch(
            "/v1/resources",
            json={
                "resources": {"llm": {"resource_type": "llm", "endpoint": "http://e", "model": "m"}},
                "metadata": {"why": "t"},
            },
        )
    )
    assert v2["version"] == 2 and set(v2["resources"]) == {"prompt", "llm"} and v2["metadata"] == {"why": "t"}
    assert ok(api.get("/v1/resources/latest"))["version"] == 2
    assert ok(api.get("/v1/resources/1"))["resources"] == v1["resources"]
    page = ok(api.get("/v1/resources", params={"limit": 1}))
    assert [r["version"] for r in page["items"]] == [2]
    older = ok(api.get("/v1/resources", params={"limit": 1, "cursor": page["next_cursor"]}))
    assert [r["version"] for r in older["items"]] == [1]


def test_workers_register_heartbeat_and_list(api: httpx.Client) -> None:
    w = ok(api.post("/v1/workers/runner/0", json={"status": "busy", "metadata": {"host": "h"}}))
    assert w["worker_id"] == "runner/0" and w["status"] == "busy"
    again = ok(api.post("/v1/workers/runner/0", json={}))
    assert again["last_heartbeat_time"] >= w["last_heartbeat_time"] and again["metadata"] == {"host": "h"}
    assert ok(api.get("/v1/workers/runner/0"))["worker_id"] == "runner/0"
    assert [x["worker_id"] for x in ok(api.get("/v1/workers"))] == ["runner/0"]


def test_stats_and_deadline_check(api: httpx.Client, store: MemoryStore) -> None:
    enqueue(api, {"rollout_id": "r1", "config": {"timeout_seconds": 0.05, "max_attempts": 1}}, {"rollout_id": "r2"})
    claim(api)
    time.sleep(0.1)
    expired = ok(api.post("/v1/deadlines/check"))["expired"]
    assert expired in (0, 1)  # the background check may have expired it first
    stats = ok(api.get("/v1/stats"))
    assert stats["total_rollouts"] == 2 and stats["queue_depth"] == 1
    assert stats["rollouts_by_status"]["failed"] == 1
    assert stats["attempts_by_status"]["timeout"] == 1


def test_the_server_expires_overdue_attempts_on_its_own(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1", "config": {"unresponsive_seconds": 0.05, "max_attempts": 1}})
    claim(api)
    deadline = time.monotonic() + 5
    while ok(api.get("/v1/stats"))["rollouts_by_status"]["failed"] != 1:
        assert time.monotonic() < deadline, "the background deadline check never ran"
        time.sleep(0.02)


def test_metrics_report_requests_by_route_template(api: httpx.Client) -> None:
    enqueue(api, {"rollout_id": "r1"})
    ok(api.get("/v1/rollouts/r1"))
    text = api.get("/metrics").text
    assert 'route="/v1/rollouts/{rollout_id}"' in text
    assert "agentbolt_queue_depth 1.0" in text


# ---------------------------------------------------------------------------- batch
def test_batch_runs_ops_in_order_and_each_op_fails_alone(api: httpx.Client, store: MemoryStore) -> None:
    enqueue(api, {"rollout_id": "r1"})
    (c,) = claim(api)
    aid = c["attempt"]["attempt_id"]
    ops = [
        {"op": "enqueue_rollouts", "args": {"rollouts": [{"rollout_id": "r2"}]}},
        {
            "op": "add_spans",
            "args": {"spans": [{"rollout_id": "r1", "attempt_id": aid, "name": "ok", "span_id": "s1"}]},
        },
        {"op": "add_spans", "args": {"spans": [{"rollout_id": "nope", "attempt_id": aid, "name": "lost"}]}},
        {"op": "heartbeat", "args": {"rollout_id": "r1", "attempt_id": aid}},
        {"op": "update_attempt", "args": {"rollout_id": "r1", "attempt_id": aid, "status": "preparing"}},
        {"op": "update_worker", "args": {"worker_id": "w9", "status": "idle"}},
        {"op": "claim_rollouts", "args": {"worker_id": "w9", "limit": "many"}},
        {"op": "claim_rollouts", "args": {"worker_id": "w9", "limit": 5}},
    ]
    results = ok(api.post("/v1/batch", json={"ops": ops}))["results"]
    assert len(results) == len(ops)
    assert results[0]["ok"] and results[0]["result"][0]["rollout_id"] == "r2"
    assert results[1]["ok"] and results[1]["result"][0]["sequence_id"] == 0
    assert results[2] == {"ok": False, "status": 404, "error": results[2]["error"]}
    assert results[2]["error"]["code"] == "not_found"
    assert results[3]["ok"] and results[3]["result"]["status"] == "running"
    assert not results[4]["ok"] and results[4]["status"] == 409
    assert results[5]["ok"] and results[5]["result"]["worker_id"] == "w9"
    assert not results[6]["ok"] and results[6]["status"] == 422 and "limit" in results[6]["error"]["message"]
    assert results[7]["ok"]
    claimed = [x["rollout"]["rollout_id"] for x in results[7]["result"]]
    assert claimed in ([], ["r2"])  # r2 was enqueued concurrently in the same batch
    assert all(x["token"].startswith("ab1.") for x in results[7]["result"])
    assert [s.name for s in asyncio.run(store.get_spans("r1"))] == ["ok"]


def test_an_empty_batch_is_an_empty_answer(api: httpx.Client) -> None:
    assert ok(api.post("/v1/batch", json={"ops": []})) == {"results": []}
