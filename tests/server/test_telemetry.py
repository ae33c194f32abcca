"""Server telemetry (Prometheus): request and span counters, and store gauges read at scrape time."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentbolt.server.telemetry import ServerTelemetry
from agentbolt.store import MemoryStore
from agentbolt.types import AttemptStatus, Span


def samples(exposition: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text exposition, keyed by name and labels."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(exposition.decode())
        for s in family.samples
    }


def request_labels(method: str = "GET", route: str = "/v1/rollouts", status: str = "2xx") -> dict[str, str]:
    return {"method": method, "route": route, "status": status}


def test_requests_are_counted_and_timed_by_status_class() -> None:
    telemetry = ServerTelemetry()
    telemetry.observe_request("get", "/v1/rollouts", 200, 0.02)
    telemetry.observe_request("GET", "/v1/rollouts", 204, 0.3)
    telemetry.observe_request("POST", "/v1/rollouts", 404, 0.001)
    value = telemetry.registry.get_sample_value

    assert value("agentbolt_http_requests_total", request_labels()) == 2
    assert value("agentbolt_http_requests_total", request_labels("POST", status="4xx")) == 1
    assert value("agentbolt_http_request_duration_seconds_count", request_labels()) == 2
    assert value("agentbolt_http_request_duration_seconds_sum", request_labels()) == pytest.approx(0.32)
    assert value("agentbolt_http_request_duration_seconds_bucket", {**request_labels(), "le": "0.025"}) == 1
    assert value("agentbolt_http_request_duration_seconds_bucket", {**request_labels(), "le": "0.5"}) == 2


def test_spans_ingested_counts_up() -> None:
    telemetry = ServerTelemetry()
    telemetry.spans_ingested(3)
    telemetry.spans_ingested(0)
    telemetry.spans_ingested(4)
    assert telemetry.registry.get_sample_value("agentbolt_spans_ingested_total") == 7
    with pytest.raises(ValueError, match="n >= 0"):
        telemetry.spans_ingested(-1)


async def test_render_reports_the_store_state() -> None:
    store = MemoryStore()
    for i in range(4):
        await store.enqueue_rollout({"i": i})
    claim = await store.claim_rollout("w1")
    assert claim is not None
    await store.add_span(Span(rollout_id=claim.rollout.rollout_id, attempt_id=claim.attempt.attempt_id, name="step"))
    await store.update_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id, status=AttemptStatus.SUCCEEDED)
    await store.update_worker("w1")
    telemetry = ServerTelemetry()
    telemetry.observe_request("GET", "/metrics", 200, 0.01)

    body, content_type = await telemetry.render(store)
    got = samples(body)

    assert content_type.startswith("text/plain")
    assert got[("agentbolt_queue_depth", frozenset())] == 3
    assert got[("agentbolt_rollouts", frozenset({("status", "queuing")}))] == 3
    assert got[("agentbolt_rollouts", frozenset({("status", "succeeded")}))] == 1
    assert got[("agentbolt_rollouts", frozenset({("status", "failed")}))] == 0  # empty statuses still reported
    assert got[("agentbolt_attempts", frozenset({("status", "succeeded")}))] == 1
    assert got[("agentbolt_spans_total", frozenset())] == 1
    assert got[("agentbolt_workers", frozenset())] == 1
    assert got[("agentbolt_http_requests_total", frozenset(request_labels(route="/metrics").items()))] == 1


async def test_render_follows_the_store_between_scrapes() -> None:
    store = MemoryStore()
    telemetry = ServerTelemetry()
    assert samples((await telemetry.render(store))[0])[("agentbolt_queue_depth", frozenset())] == 0
    await store.enqueue_rollout("task")
    assert samples((await telemetry.render(store))[0])[("agentbolt_queue_depth", frozenset())] == 1


async def test_instances_do_not_share_values() -> None:
    first, second = ServerTelemetry(), ServerTelemetry()
    first.observe_request("GET", "/health", 200, 0.001)
    first.spans_ingested(5)
    busy = MemoryStore()
    await busy.enqueue_rollout("task")

    assert second.registry.get_sample_value("agentbolt_http_requests_total", request_labels(route="/health")) is None
    assert second.registry.get_sample_value("agentbolt_spans_ingested_total") == 0
    await first.render(busy)
    rendered = samples((await second.render(MemoryStore()))[0])
    assert rendered[("agentbolt_queue_depth", frozenset())] == 0
    assert rendered[("agentbolt_spans_ingested_total", frozenset())] == 0


async def test_metrics_endpoint_of_a_running_server() -> None:
    """``GET /metrics`` of a served app shows its own traffic and the store's queue."""
    import httpx

    from agentbolt.server.testing import serve_in_thread

    store = MemoryStore()
    await store.enqueue_rollout("task")
    with serve_in_thread(store, admin_token=None) as base_url:
        with httpx.Client(base_url=base_url, timeout=10) as client:
            client.get("/metrics")
            response = client.get("/metrics")

    assert response.status_code == 200
    got = samples(response.content)
    assert got[("agentbolt_queue_depth", frozenset())] == 1
    assert got[("agentbolt_http_requests_total", frozenset(request_labels(route="/metrics").items()))] >= 1
