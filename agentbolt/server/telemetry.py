"""The server's telemetry — its Prometheus exposition on ``GET /metrics`` (not the training
metrics of :mod:`agentbolt.metrics`): HTTP traffic, span ingestion, store state.

Each :class:`ServerTelemetry` owns its own ``CollectorRegistry`` (never the process-wide
default), so several apps in one process — tests, a server per store — keep separate
numbers. Store gauges are read from ``store.stats()`` at scrape time, so they are
exact for every backend and cost nothing between scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agentbolt.store.base import Store
from agentbolt.types import AttemptStatus, RolloutStatus, StoreStats

__all__ = ["ServerTelemetry", "REQUEST_DURATION_BUCKETS"]

REQUEST_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Seconds. Longer than Prometheus' defaults: long-polls (waiting for rollouts, claims)
and proxied model calls legitimately take tens of seconds."""


class ServerTelemetry:
    """The metrics one server app exposes on ``/metrics``.

    Call :meth:`observe_request` from the HTTP middleware, :meth:`spans_ingested` when
    spans are stored, and answer a scrape with :meth:`render`.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("method", "route", "status")
        self._request_duration = Histogram(
            "agentbolt_http_request_duration_seconds",
            "Time to answer HTTP requests, by method, route template and status class.",
            labels,
            buckets=REQUEST_DURATION_BUCKETS,
            registry=self.registry,
        )
        self._requests = Counter(
            "agentbolt_http_requests",
            "HTTP requests answered, by method, route template and status class.",
            labels,
            registry=self.registry,
        )
        self._spans_ingested = Counter(
            "agentbolt_spans_ingested",
            "Spans received for storage (store API and OTLP), before deduplication.",
            registry=self.registry,
        )
        self._store = _StoreCollector()
        self.registry.register(self._store)
        #: the labelled series of each (method, route, status) seen, looked up once
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request. ``route`` should be the route template
        (``/v1/rollouts/{rollout_id}``), not the raw path, to keep label values few."""
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            labels = (method.upper(), route, f"{status // 100}xx")
            series = self._series[key] = (self._request_duration.labels(*labels), self._requests.labels(*labels))
        series[0].observe(seconds)
        series[1].inc()

    def spans_ingested(self, n: int) -> None:
        """Count ``n`` spans received."""
        if n < 0:
            raise ValueError(f"spans_ingested(n) needs n >= 0, got {n}")
        self._spans_ingested.inc(n)

    async def render(self, store: Store) -> tuple[bytes, str]:
        """The Prometheus text exposition of every metric, with the store gauges
        refreshed from ``store.stats()``, and its content type."""
        self._store.stats = await store.stats()
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _StoreCollector(Collector):
    """Gauges of the store's state, from the latest ``StoreStats`` (none before the
    first scrape). Every known status is exported, zero included, so series do not
    vanish when a status empties."""

    def __init__(self) -> None:
        self.stats: StoreStats | None = None

    def describe(self) -> Iterator[Metric]:
        # Declared up front so the registry rejects a clashing metric name at once.
        return self._families(None)

    def collect(self) -> Iterator[Metric]:
        return self._families(self.stats)

    def _families(self, stats: StoreStats | None) -> Iterator[Metric]:
        queue = GaugeMetricFamily("agentbolt_queue_depth", "Rollouts waiting to be claimed (queuing or requeuing).")
        rollouts = GaugeMetricFamily("agentbolt_rollouts", "Rollouts by status.", labels=["status"])
        attempts = GaugeMetricFamily("agentbolt_attempts", "Attempts by status.", labels=["status"])
        spans = GaugeMetricFamily("agentbolt_spans_total", "Spans stored.")
        workers = GaugeMetricFamily("agentbolt_workers", "Workers known to the store.")
        version = GaugeMetricFamily("agentbolt_resources_latest_version", "Latest published resources version.")
        if stats is not None:
            queue.add_metric([], stats.queue_depth)
            for status, count in _by_status(RolloutStatus, stats.rollouts_by_status).items():
                rollouts.add_metric([status], count)
            for status, count in _by_status(AttemptStatus, stats.attempts_by_status).items():
                attempts.add_metric([status], count)
            spans.add_metric([], stats.total_spans)
            workers.add_metric([], stats.total_workers)
            if stats.latest_resources_version is not None:
                version.add_metric([], stats.latest_resources_version)
        yield from (queue, rollouts, attempts, spans, workers, version)


def _by_status(statuses: type[RolloutStatus | AttemptStatus], counts: dict[str, int]) -> dict[str, int]:
    out = {s.value: 0 for s in statuses}
    out.update(counts)
    return out
