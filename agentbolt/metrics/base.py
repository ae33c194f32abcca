"""``MetricsSink``: where a training run's per-step numbers go (a file, the store, an
experiment tracker). Algorithms log through :class:`~agentbolt.metrics.logger.MetricsLogger`,
which fans out to sinks."""

from __future__ import annotations

import abc
from collections.abc import Mapping

from agentbolt.types import MetricValue

__all__ = ["MetricsSink", "numeric_values"]


class MetricsSink(abc.ABC):
    """One destination for metrics. ``log`` is called once per step (or several times
    for one step: train then eval numbers); ``close`` once at the end."""

    @abc.abstractmethod
    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        """Record ``values`` for training step ``step``."""

    async def close(self) -> None:  # noqa: B027 - most sinks have nothing to release
        """Flush and release what the sink holds. Idempotent."""


def numeric_values(values: Mapping[str, MetricValue]) -> dict[str, float | int]:
    """``values`` without the ``None`` entries (trackers that only take numbers)."""
    return {k: v for k, v in values.items() if v is not None}
