"""v0.3's metrics backends (``agentlightning.utils.metrics``): counters and histograms
with labels, registered first and then updated from async code.

* :class:`ConsoleMetricsBackend` logs, every ``log_interval_seconds``, each metric over
  a sliding window: a counter's total and rate per second, a histogram's count and
  P50/P95/P99 — grouped by the first ``group_level`` labels;
* :class:`PrometheusMetricsBackend` exports them with ``prometheus_client`` (on its
  default registry: ``prometheus_client.start_http_server`` serves them);
* :class:`MultiMetricsBackend` sends every update to several backends.

These are for a program's own operational metrics; agentbolt's training metrics (one
dict of numbers per step, to JSONL, the store, TensorBoard...) are
:class:`agentbolt.metrics.MetricsLogger`.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import prometheus_client

__all__ = ["ConsoleMetricsBackend", "MetricsBackend", "MultiMetricsBackend", "PrometheusMetricsBackend"]

log = logging.getLogger("agentlightning.utils.metrics")

LabelDict = dict[str, str]
Kind = Literal["counter", "histogram"]


@dataclass(frozen=True)
class _Definition:
    kind: Kind
    label_names: tuple[str, ...]
    buckets: tuple[float, ...] | None = None
    group_level: int | None = None


@dataclass
class _Series:
    events: deque[tuple[float, float]] = field(default_factory=deque)
    total: float = 0.0


class MetricsBackend:
    """A place metrics go: register each metric once, then update it."""

    def __init__(self) -> None:
        self._definitions: dict[str, _Definition] = {}

    def has_prometheus(self) -> bool:
        """Whether this backend exports to Prometheus."""
        return False

    def register_counter(self, name: str, label_names: Sequence[str] | None = None,
                         group_level: int | None = None) -> None:
        """A counter with these label names (their order is the grouping order)."""
        self._define(name, _Definition("counter", tuple(label_names or ()), None, group_level))

    def register_histogram(self, name: str, label_names: Sequence[str] | None = None,
                           buckets: Sequence[float] | None = None, group_level: int | None = None) -> None:
        """A histogram with these label names and bucket upper bounds."""
        self._define(name, _Definition("histogram", tuple(label_names or ()),
                                       tuple(buckets) if buckets is not None else None, group_level))

    async def inc_counter(self, name: str, amount: float = 1.0, labels: LabelDict | None = None) -> None:
        """Add ``amount`` (not negative) to a registered counter."""
        if amount < 0:
            raise ValueError(f"counter {name!r} only goes up: amount {amount} is negative")
        self._record("counter", name, amount, self._labels("counter", name, labels))

    async def observe_histogram(self, name: str, value: float, labels: LabelDict | None = None) -> None:
        """Record one observation of a registered histogram."""
        self._record("histogram", name, value, self._labels("histogram", name, labels))

    # --- what a backend does with it
    def _on_define(self, name: str, definition: _Definition) -> None:
        """A new metric was registered."""

    def _record(self, kind: Kind, name: str, value: float, labels: LabelDict) -> None:
        raise NotImplementedError(f"{type(self).__name__} records no metrics: use a concrete backend")

    # --- registration and validation, the same for every backend
    def _define(self, name: str, definition: _Definition) -> None:
        if not name:
            raise ValueError("a metric needs a name")
        existing = self._definitions.get(name)
        if existing is not None:
            if (existing.kind, existing.label_names) != (definition.kind, definition.label_names):
                raise ValueError(f"metric {name!r} is already a {existing.kind} with labels "
                                 f"{list(existing.label_names)}")
            return
        self._definitions[name] = definition
        self._on_define(name, definition)

    def _labels(self, kind: Kind, name: str, labels: LabelDict | None) -> LabelDict:
        definition = self._definitions.get(name)
        if definition is None:
            raise ValueError(f"metric {name!r} is not registered: call register_{kind}({name!r}, ...) first")
        if definition.kind != kind:
            raise ValueError(f"metric {name!r} is a {definition.kind}, not a {kind}")
        given = dict(labels or {})
        if set(given) != set(definition.label_names):
            raise ValueError(f"metric {name!r} takes labels {list(definition.label_names)}, got {sorted(given)}")
        return {k: str(given[k]) for k in definition.label_names}


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


class ConsoleMetricsBackend(MetricsBackend):
    """Logs every metric over a sliding window (see the module doc). ``window_seconds=None``
    keeps every event; ``group_level`` (here, or per metric at registration) truncates the
    labels each log line is grouped by — ``None`` or below 1 merges all label values."""

    def __init__(self, window_seconds: float | None = 60.0, log_interval_seconds: float = 10.0,
                 group_level: int | None = None) -> None:
        super().__init__()
        self.window_seconds = window_seconds
        self.log_interval_seconds = log_interval_seconds
        self.group_level = group_level
        self._series: dict[tuple[str, tuple[tuple[str, str], ...]], _Series] = {}
        self._lock = threading.Lock()
        self._last_log: float | None = None

    def _record(self, kind: Kind, name: str, value: float, labels: LabelDict) -> None:
        now = time.time()
        with self._lock:
            series = self._series.setdefault((name, tuple(labels.items())), _Series())
            series.events.append((now, float(value)))
            series.total += float(value)
            due = self._last_log is None or now - self._last_log >= self.log_interval_seconds
            if due:
                self._last_log = now
                lines = self.snapshot(now)
        if due:
            for line in lines:
                log.info(line)

    def snapshot(self, now: float | None = None) -> list[str]:
        """One line per metric and label group, as the backend logs them."""
        now = time.time() if now is None else now
        groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
        for (name, labels), series in self._series.items():
            if self.window_seconds is not None:
                while series.events and series.events[0][0] < now - self.window_seconds:
                    series.events.popleft()
            level = self.group_level if self.group_level is not None else self._definitions[name].group_level
            kept = labels[: level] if level is not None and level >= 1 else ()
            groups.setdefault((name, kept), []).extend(series.events)
        lines = []
        for (name, kept), events in sorted(groups.items()):
            label_text = "{" + ",".join(f"{k}={v}" for k, v in kept) + "}" if kept else ""
            values = [v for _, v in events]
            if self._definitions[name].kind == "counter":
                # the rate is over the window, or (no window) since the group's first event
                span = self.window_seconds or max(1e-9, now - min((t for t, _ in events), default=now))
                total = sum(values)
                lines.append(f"{name}{label_text} total={total:g} rate={total / span:.3g}/s")
            elif values:
                ordered = sorted(values)
                lines.append(f"{name}{label_text} count={len(ordered)} p50={_percentile(ordered, 50):.4g} "
                             f"p95={_percentile(ordered, 95):.4g} p99={_percentile(ordered, 99):.4g}")
        return lines


_COLLECTORS: dict[str, tuple[Kind, tuple[str, ...], Any]] = {}
_COLLECTORS_LOCK = threading.Lock()


class PrometheusMetricsBackend(MetricsBackend):
    """Exports to ``prometheus_client``'s default registry. Several backends (or a second
    registration) share one collector per metric name."""

    def has_prometheus(self) -> bool:
        return True

    def _on_define(self, name: str, definition: _Definition) -> None:
        with _COLLECTORS_LOCK:
            existing = _COLLECTORS.get(name)
            if existing is not None:
                if existing[:2] != (definition.kind, definition.label_names):
                    raise ValueError(f"Prometheus metric {name!r} is already a {existing[0]} with labels "
                                     f"{list(existing[1])}")
                return
            documentation = f"{name} ({definition.kind})"
            if definition.kind == "counter":
                collector: Any = prometheus_client.Counter(name, documentation, definition.label_names)
            else:
                buckets = definition.buckets or prometheus_client.Histogram.DEFAULT_BUCKETS
                collector = prometheus_client.Histogram(name, documentation, definition.label_names,
                                                        buckets=buckets)
            _COLLECTORS[name] = (definition.kind, definition.label_names, collector)

    def _record(self, kind: Kind, name: str, value: float, labels: LabelDict) -> None:
        collector = _COLLECTORS[name][2]
        target = collector.labels(**labels) if labels else collector
        if kind == "counter":
            target.inc(value)
        else:
            target.observe(value)


class MultiMetricsBackend(MetricsBackend):
    """Every registration and update goes to each of ``backends``."""

    def __init__(self, backends: Sequence[MetricsBackend]) -> None:
        super().__init__()
        if not backends:
            raise ValueError("MultiMetricsBackend needs at least one backend")
        self.backends = list(backends)

    def has_prometheus(self) -> bool:
        return any(b.has_prometheus() for b in self.backends)

    def _on_define(self, name: str, definition: _Definition) -> None:
        for backend in self.backends:
            backend._define(name, definition)

    def _record(self, kind: Kind, name: str, value: float, labels: LabelDict) -> None:
        for backend in self.backends:
            backend._record(kind, name, value, labels)
