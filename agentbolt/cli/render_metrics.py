"""Rich rendering of training metrics for ``agentbolt store metrics`` (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.table import Table

from agentbolt.cli.render import format_clock
from agentbolt.types import MetricRecord, MetricValue

__all__ = ["format_metric", "metric_columns", "metrics_table"]


def format_metric(value: MetricValue) -> str:
    """``0.4213``, ``1.234e-05``, ``512``; ``-`` for no value."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"


def metric_columns(records: Sequence[MetricRecord], keys: Sequence[str] | None = None) -> list[str]:
    """The metric names to show: ``keys`` as given, else every name seen, sorted."""
    if keys:
        return list(keys)
    return sorted({k for r in records for k in r.values})


def metrics_table(
    records: Sequence[MetricRecord], keys: Sequence[str] | None = None, now: float | None = None
) -> Table:
    """One row per step (ascending): step, time, then one column per metric."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("time", no_wrap=True)
    columns = metric_columns(records, keys)
    for name in columns:
        table.add_column(name, justify="right", overflow="fold")
    for r in records:
        table.add_row(str(r.step), format_clock(r.timestamp, now), *(format_metric(r.values.get(k)) for k in columns))
    return table
