"""Rich renderings of store objects for people; ``json_line`` for scripts.

Every function here is pure: it takes models and returns a renderable (or a string),
so the formatting can be tested without a store or a terminal.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from pydantic import BaseModel
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agentbolt import semconv
from agentbolt.types import (
    LLM,
    Attempt,
    AttemptStatus,
    Resources,
    Rollout,
    RolloutStatus,
    Span,
    SpanStatus,
    StoreStats,
    Worker,
    WorkerStatus,
)

__all__ = [
    "STATUS_STYLES",
    "format_age",
    "format_clock",
    "format_duration",
    "format_reward",
    "format_time",
    "json_line",
    "masked_resources",
    "resources_table",
    "resources_view",
    "rollout_view",
    "rollouts_table",
    "spans_table",
    "stats_view",
    "status_text",
    "workers_table",
]

STATUS_STYLES: dict[str, str] = {
    RolloutStatus.QUEUING: "cyan",
    RolloutStatus.PREPARING: "yellow",
    RolloutStatus.RUNNING: "blue",
    RolloutStatus.REQUEUING: "magenta",
    RolloutStatus.SUCCEEDED: "green",
    RolloutStatus.FAILED: "red",
    RolloutStatus.CANCELLED: "dim",
    AttemptStatus.TIMEOUT: "red",
    AttemptStatus.UNRESPONSIVE: "magenta",
    WorkerStatus.IDLE: "green",
    WorkerStatus.BUSY: "blue",
    WorkerStatus.OFFLINE: "dim",
    SpanStatus.OK: "green",
    SpanStatus.ERROR: "red",
    SpanStatus.UNSET: "dim",
}
"""Colour of each rollout, attempt, worker and span status."""

_MASK = "***"
_DASH = "-"


# ------------------------------------------------------------------ scalars
def json_line(value: BaseModel | Mapping[str, Any]) -> str:
    """One compact JSON document on one line."""
    data = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS).decode()


def format_time(ts: float | None) -> str:
    """Local wall-clock time, to the second."""
    if ts is None:
        return _DASH
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def format_clock(ts: float | None, now: float | None = None) -> str:
    """Compact local time for tables: ``14:03:07`` today, the full date otherwise."""
    if ts is None:
        return _DASH
    when = datetime.fromtimestamp(ts)
    if when.date() == datetime.fromtimestamp(now or time.time()).date():
        return when.strftime("%H:%M:%S")
    return when.strftime("%Y-%m-%d %H:%M:%S")


def format_duration(seconds: float | None) -> str:
    """``850ms``, ``12.3s``, ``4m05s``, ``2h03m``."""
    if seconds is None:
        return _DASH
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_age(ts: float | None, now: float | None = None) -> str:
    """How long ago ``ts`` was: ``3.2s ago``."""
    if ts is None:
        return _DASH
    return f"{format_duration((now or time.time()) - ts)} ago"


def format_reward(reward: float | None) -> str:
    return _DASH if reward is None else f"{reward:.4g}"


def status_text(status: str | None) -> Text:
    """A status word in its colour."""
    if status is None:
        return Text(_DASH)
    return Text(str(status), style=STATUS_STYLES.get(status, ""))


def _elapsed(start: float | None, end: float | None, now: float | None) -> str:
    """Run time so far (``…`` marks one still going)."""
    if start is None:
        return _DASH
    if end is None:
        return format_duration((now or time.time()) - start) + "…"
    return format_duration(end - start)


def _short_json(value: Any, limit: int = 120) -> str:
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _id(value: str | None) -> Text:
    """An id: folded onto several lines in a narrow terminal, never cut with an ellipsis."""
    return Text(value or _DASH, overflow="fold")


def _table(title: str | None = None) -> Table:
    return Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False, show_edge=False)


def _long(table: Table, header: str) -> None:
    """A column that folds when space is short (ids, times, free text)."""
    table.add_column(header, overflow="fold")


def _short(table: Table, header: str, right: bool = False) -> None:
    """A column that keeps its width: short words and numbers."""
    table.add_column(header, no_wrap=True, justify="right" if right else "left")


# ------------------------------------------------------------------ stats
def stats_view(stats: StoreStats, store_url: str) -> RenderableType:
    """Totals, then the rollouts and attempts counted by status."""
    totals = Table.grid(padding=(0, 2))
    totals.add_column(style="bold")
    totals.add_column()
    totals.add_row("store", store_url)
    totals.add_row("rollouts", str(stats.total_rollouts))
    totals.add_row("queue depth", str(stats.queue_depth))
    totals.add_row("attempts", str(stats.total_attempts))
    totals.add_row("spans", str(stats.total_spans))
    totals.add_row("workers", str(stats.total_workers))
    totals.add_row(
        "resources version", _DASH if stats.latest_resources_version is None else str(stats.latest_resources_version)
    )

    by_status = _table()
    by_status.add_column("rollout status")
    by_status.add_column("count", justify="right")
    for status, count in stats.rollouts_by_status.items():
        by_status.add_row(status_text(status), str(count))

    attempts = _table()
    attempts.add_column("attempt status")
    attempts.add_column("count", justify="right")
    for status, count in stats.attempts_by_status.items():
        attempts.add_row(status_text(status), str(count))

    counts = Table.grid(padding=(0, 4))
    counts.add_row(by_status, attempts)
    return Group(totals, Text(), counts)


# ------------------------------------------------------------------ rollouts
def rollouts_table(rollouts: Sequence[Rollout], now: float | None = None) -> Table:
    """One row per rollout: id, status, mode, reward, attempts (``tries``), resources
    version (``res``), created, duration."""
    table = _table()
    _long(table, "rollout")
    _short(table, "status")
    _short(table, "mode")
    _short(table, "reward", right=True)
    _short(table, "tries", right=True)
    _short(table, "res", right=True)
    _short(table, "created")
    _short(table, "duration", right=True)
    for r in rollouts:
        table.add_row(
            _id(r.rollout_id),
            status_text(r.status),
            r.mode.value,
            format_reward(r.reward),
            str(r.attempt_count),
            _DASH if r.resources_version is None else f"v{r.resources_version}",
            format_clock(r.created_at, now),
            _elapsed(r.start_time, r.end_time, now),
        )
    return table


def rollout_view(rollout: Rollout, attempts: Sequence[Attempt], now: float | None = None) -> RenderableType:
    """A rollout's fields, then its attempts oldest first."""
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column(overflow="fold")
    r = rollout
    fields.add_row("rollout", _id(r.rollout_id))
    fields.add_row("status", status_text(r.status))
    fields.add_row("mode", r.mode.value)
    fields.add_row("reward", format_reward(r.reward))
    fields.add_row("resources", _DASH if r.resources_version is None else f"v{r.resources_version}")
    fields.add_row("attempts", f"{r.attempt_count} of at most {r.config.max_attempts}")
    fields.add_row("created", format_time(r.created_at))
    fields.add_row("started", format_time(r.start_time))
    fields.add_row("ended", format_time(r.end_time))
    fields.add_row("duration", _elapsed(r.start_time, r.end_time, now))
    fields.add_row("config", _short_json(r.config.model_dump(mode="json"), 200))
    fields.add_row("input", _short_json(r.input, 500))
    if r.metadata:
        fields.add_row("metadata", _short_json(r.metadata, 500))
    with_output = [a for a in attempts if semconv.ATTEMPT_OUTPUT in a.metadata]
    if with_output:  # what the agent returned (not a reward), from the latest attempt that did
        fields.add_row("output", _short_json(with_output[-1].metadata[semconv.ATTEMPT_OUTPUT], 500))

    table = _table("attempts")
    _short(table, "#", right=True)
    _long(table, "attempt")
    _short(table, "status")
    _short(table, "worker")
    _short(table, "started")
    _short(table, "duration", right=True)
    _short(table, "heartbeat", right=True)
    _short(table, "reward", right=True)
    _long(table, "error")
    for a in attempts:
        error = _DASH if a.error is None else f"{a.error.type}: {a.error.message}"
        table.add_row(
            str(a.sequence_id),
            _id(a.attempt_id),
            status_text(a.status),
            a.worker_id or _DASH,
            format_clock(a.start_time, now),
            _elapsed(a.start_time, a.end_time, now),
            format_age(a.last_heartbeat_time, now),
            format_reward(a.reward),
            error if len(error) <= 200 else error[:199] + "…",
        )
    if not attempts:
        return Group(fields, Text(), Text("no attempts yet: the rollout has not been claimed", style="dim"))
    return Group(fields, Text(), table)


# ------------------------------------------------------------------ spans
def _span_summary(span: Span, limit: int = 80) -> str:
    reward = semconv.primary_reward(span.name, span.attributes)
    if reward is not None:
        return f"reward={reward:.4g}"
    parts = [f"{k}={_short_json(v, 40)}" for k, v in list(span.attributes.items())[:3]]
    text = " ".join(parts)
    if len(span.attributes) > 3:
        text += f" (+{len(span.attributes) - 3})"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def spans_table(spans: Sequence[Span], attempt_numbers: Mapping[str, int], now: float | None = None) -> Table:
    """One row per span, in store order. ``#`` is ``attempt.sequence``."""
    table = _table()
    _short(table, "#", right=True)
    _long(table, "name")
    _short(table, "status")
    _short(table, "start")
    _short(table, "duration", right=True)
    _long(table, "span")
    _long(table, "parent")
    _long(table, "attributes")
    for s in spans:
        attempt_no = attempt_numbers.get(s.attempt_id)
        number = f"{attempt_no if attempt_no is not None else '?'}.{s.sequence_id}"
        duration = None if s.end_time is None else s.end_time - s.start_time
        table.add_row(
            number,
            s.name,
            status_text(s.status),
            format_clock(s.start_time, now),
            format_duration(duration),
            _id(s.span_id),
            _id(s.parent_id),
            _span_summary(s),
        )
    return table


# ------------------------------------------------------------------ resources
def masked_resources(resources: Resources, show_secrets: bool = False) -> Resources:
    """A copy with API keys replaced by ``***`` unless ``show_secrets``."""
    if show_secrets:
        return resources
    masked = {
        name: res.model_copy(update={"api_key": _MASK}) if isinstance(res, LLM) and res.api_key else res
        for name, res in resources.resources.items()
    }
    return resources.model_copy(update={"resources": masked})


def _describe(res: Any) -> str:
    if isinstance(res, LLM):
        return f"{res.model} @ {res.endpoint}"
    if res.resource_type == "prompt_template":
        return _short_json(res.template, 60)
    return _short_json(res.value, 60)


def resources_table(versions: Sequence[Resources], now: float | None = None) -> Table:
    """One row per resources version, newest first as the store returns them."""
    table = _table()
    _short(table, "version", right=True)
    _short(table, "created")
    _long(table, "resources")
    _long(table, "metadata")
    for v in versions:
        names = ", ".join(f"{name} ({res.resource_type})" for name, res in v.resources.items())
        table.add_row(
            f"v{v.version}",
            format_clock(v.created_at, now),
            names or _DASH,
            _short_json(v.metadata, 80) if v.metadata else _DASH,
        )
    return table


def resources_view(resources: Resources, show_secrets: bool = False) -> RenderableType:
    """Every named resource of one version, with its full settings."""
    shown = masked_resources(resources, show_secrets)
    head = Text.assemble(("resources ", "bold"), f"v{shown.version}", "  created ", format_time(shown.created_at))
    table = _table()
    _long(table, "name")
    _short(table, "type")
    _long(table, "summary")
    _long(table, "settings")
    for name, res in shown.resources.items():
        settings = res.model_dump(mode="json", exclude={"resource_type"})
        table.add_row(name, res.resource_type, _describe(res), _short_json(settings, 400))
    parts: list[RenderableType] = [head, table]
    if shown.metadata:
        parts.append(Text(f"metadata {_short_json(shown.metadata, 400)}"))
    return Group(*parts)


# ------------------------------------------------------------------ workers
def workers_table(workers: Sequence[Worker], now: float | None = None) -> Table:
    """One row per worker: what it is doing and when it was last heard from."""
    table = _table()
    _long(table, "worker")
    _short(table, "status")
    _long(table, "rollout")
    _long(table, "attempt")
    _short(table, "heartbeat", right=True)
    _short(table, "registered")
    _long(table, "metadata")
    for w in workers:
        table.add_row(
            _id(w.worker_id),
            status_text(w.status),
            _id(w.current_rollout_id),
            _id(w.current_attempt_id),
            format_age(w.last_heartbeat_time, now),
            format_clock(w.created_at, now),
            _short_json(w.metadata, 80) if w.metadata else _DASH,
        )
    return table
