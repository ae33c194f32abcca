"""v0.3's metrics backends (``examples/minimal/write_metrics.py``): register, then update;
the console backend logs windowed totals, rates and percentiles; Prometheus exports."""

from __future__ import annotations

import logging

import prometheus_client
import pytest

from agentbolt.compat.utils.metrics import (
    ConsoleMetricsBackend,
    MetricsBackend,
    MultiMetricsBackend,
    PrometheusMetricsBackend,
)


def _register(backend: MetricsBackend, prefix: str) -> None:
    backend.register_counter(f"{prefix}_requests_total", ["operation", "status"])
    backend.register_histogram(f"{prefix}_latency_seconds", ["operation"], buckets=[0.01, 0.1, 1.0])


async def test_console_backend_logs_totals_and_percentiles_by_label_group(caplog: pytest.LogCaptureFixture) -> None:
    backend = ConsoleMetricsBackend(window_seconds=None, log_interval_seconds=3600, group_level=1)
    _register(backend, "console")
    with caplog.at_level(logging.INFO, logger="agentlightning.utils.metrics"):
        await backend.inc_counter("console_requests_total", labels={"operation": "search", "status": "200"})
    assert any("console_requests_total{operation=search} total=1" in r.message for r in caplog.records)
    for i, status in enumerate(["200", "500", "200"]):
        await backend.inc_counter("console_requests_total", 2, labels={"operation": "search", "status": status})
        await backend.observe_histogram("console_latency_seconds", 0.01 * (i + 1), labels={"operation": "search"})
    lines = backend.snapshot()
    assert any(line.startswith("console_requests_total{operation=search} total=7 ") for line in lines)
    assert "console_latency_seconds{operation=search} count=3 p50=0.02 p95=0.03 p99=0.03" in lines


async def test_wrong_use_is_refused_with_what_to_do() -> None:
    backend = ConsoleMetricsBackend()
    _register(backend, "wrong")
    with pytest.raises(ValueError, match="not registered: call register_counter"):
        await backend.inc_counter("nope")
    with pytest.raises(ValueError, match="takes labels"):
        await backend.inc_counter("wrong_requests_total", labels={"operation": "x"})
    with pytest.raises(ValueError, match="is a counter, not a histogram"):
        await backend.observe_histogram("wrong_requests_total", 1.0, labels={"operation": "x", "status": "1"})
    with pytest.raises(ValueError, match="already a counter"):
        backend.register_histogram("wrong_requests_total", ["operation", "status"])
    with pytest.raises(ValueError, match="only goes up"):
        await backend.inc_counter("wrong_requests_total", -1, labels={"operation": "x", "status": "1"})


async def test_prometheus_and_multi_backends_export_what_is_recorded() -> None:
    console, prom = ConsoleMetricsBackend(log_interval_seconds=3600), PrometheusMetricsBackend()
    backend = MultiMetricsBackend([console, prom])
    assert backend.has_prometheus() and not console.has_prometheus()
    _register(backend, "multi_demo")
    await backend.inc_counter("multi_demo_requests_total", labels={"operation": "answer", "status": "200"})
    await backend.observe_histogram("multi_demo_latency_seconds", 0.05, labels={"operation": "answer"})
    registry = prometheus_client.REGISTRY
    assert registry.get_sample_value("multi_demo_requests_total",
                                     {"operation": "answer", "status": "200"}) == 1.0
    assert registry.get_sample_value("multi_demo_latency_seconds_bucket",
                                     {"operation": "answer", "le": "0.1"}) == 1.0
    assert any(line.startswith("multi_demo_requests_total total=1") for line in console.snapshot())
    PrometheusMetricsBackend().register_counter("multi_demo_requests_total", ["operation", "status"])  # shared
