"""Training metrics as the dashboard shows them: a summary per run, series per metric, and
per step the rows in, trained and dropped by reason."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agentbolt.metrics.rows import dropped_rows, why_nothing_trained
from agentbolt.types import MetricRecord

__all__ = ["RunTally", "metric_series", "row_steps", "run_summary"]


class RunTally:
    """What the runs list shows of one training run — step range, record count, last
    write time, metric names — kept up to date from the records read since last time.

    Feed it the records after :meth:`resume_after` (by step ascending): the last step
    seen is read again each time, so metrics merged into it later (an eval logged after
    the train numbers of the same step) are not missed.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.first_step: int | None = None
        self.last_step: int | None = None
        self.n_records = 0
        self.last_time: float | None = None
        self.keys: set[str] = set()

    def resume_after(self) -> int | None:
        """The ``after_step`` to read from next."""
        return None if self.last_step is None else self.last_step - 1

    def add(self, records: Iterable[MetricRecord]) -> None:
        for rec in records:
            if self.last_step is None or rec.step > self.last_step:
                self.n_records += 1
                self.last_step = rec.step
            if self.first_step is None or rec.step < self.first_step:
                self.first_step = rec.step
            self.keys.update(rec.values)
            self.last_time = rec.timestamp if self.last_time is None else max(self.last_time, rec.timestamp)

    def view(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "n_records": self.n_records,
            "last_time": self.last_time,
            "keys": sorted(self.keys),
        }


def run_summary(run_id: str, records: Sequence[MetricRecord]) -> dict[str, Any]:
    """One training run (all its records, by step): step range, record count, last write
    time and metric names."""
    tally = RunTally(run_id)
    tally.add(records)
    return tally.view()


def metric_series(records: Sequence[MetricRecord], keys: Sequence[str] | None) -> dict[str, list[list[Any]]]:
    """``{key: [[step, value], ...]}`` for ``keys`` (every key logged when None). A
    step that did not log a key has no point; a logged non-finite value is null."""
    wanted = list(dict.fromkeys(keys)) if keys else sorted({k for r in records for k in r.values})
    series: dict[str, list[list[Any]]] = {k: [] for k in wanted}
    for rec in records:
        for k in wanted:
            if k in rec.values:
                series[k].append([rec.step, rec.values[k]])
    return series


def row_steps(records: Sequence[MetricRecord], prefix: str = "") -> list[dict[str, Any]]:
    """Per step that logged ``<prefix>rows/in`` (:mod:`agentbolt.metrics.rows`; ``prefix``: a
    policy's ``"<policy>/"``): ``{step, rows_in, rows_trained, dropped: {reason: n} (non-zero
    only), why_nothing_trained}``, by step."""
    out = []
    for rec in records:
        rows_in = rec.values.get(f"{prefix}rows/in")
        if rows_in is None:
            continue
        out.append({"step": rec.step, "rows_in": rows_in, "rows_trained": rec.values.get(f"{prefix}rows/trained"),
                    "dropped": dropped_rows(rec.values, prefix),
                    "why_nothing_trained": why_nothing_trained(rec.values, prefix)})
    return out
