"""``StoreSink``: metrics into the Store, where the dashboard draws live curves from."""

from __future__ import annotations

from collections.abc import Mapping

from agentbolt.metrics.base import MetricsSink
from agentbolt.store.base import Store
from agentbolt.types import MetricRecord, MetricValue

__all__ = ["StoreSink"]


class StoreSink(MetricsSink):
    """Writes each :meth:`log` as a :class:`MetricRecord` of ``run_id`` with
    ``store.add_metrics`` (merged into the step if it was logged before). The store is
    the caller's: it is not closed here."""

    def __init__(self, store: Store, run_id: str) -> None:
        if not run_id:
            raise ValueError("StoreSink needs a run_id: the name the run's metrics are stored under")
        self.store = store
        self.run_id = run_id

    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        await self.store.add_metrics([MetricRecord(run_id=self.run_id, step=step, values=dict(values))])
