"""How a second training-metric record for the same ``(run_id, step)`` merges into the
stored one — the one rule every backend shares (see :meth:`Store.add_metrics`)."""

from __future__ import annotations

from agentbolt.types import MetricRecord

__all__ = ["merge_record"]


def merge_record(stored: MetricRecord | None, new: MetricRecord) -> MetricRecord:
    """``new`` merged into ``stored``: new keys added, same keys overwritten, the newer
    timestamp kept. Returns a fresh record (neither argument is changed)."""
    if stored is None:
        return new.model_copy(update={"values": dict(new.values)})
    return stored.model_copy(
        update={"values": {**stored.values, **new.values}, "timestamp": max(stored.timestamp, new.timestamp)}
    )
