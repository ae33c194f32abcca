"""What the dashboard shows, computed from store objects: pure functions, no I/O.

The routes in :mod:`agentbolt.server.routes.dashboard` read the store and hand the
objects here; each function returns the small JSON-ready dict a page draws. Keeping the
shaping here (and out of the routes) lets it be tested without a server and keeps the
payloads small: long texts are clipped, big attributes left out.

Times are seconds since the epoch, like everywhere in agentbolt; a waterfall also gives
``t0`` (its earliest time) to subtract for a time axis.

Rollouts and workers are shaped here; the rest lives in sibling modules re-exported
below: waterfall (:mod:`.dashboard_waterfall`), model calls (:mod:`.dashboard_calls`),
resources (:mod:`.dashboard_resources`), training metrics (:mod:`.dashboard_training`)
and text clipping (:mod:`.dashboard_text`).
"""

from __future__ import annotations

from typing import Any

from agentbolt.server.dashboard.calls import MESSAGE_CHARS, RESPONSE_CHARS, call_views
from agentbolt.server.dashboard.resources import resource_diffs, resources_view
from agentbolt.server.dashboard.text import INPUT_PREVIEW_CHARS, clip, duration, input_preview
from agentbolt.server.dashboard.training import RunTally, metric_series, row_steps, run_summary
from agentbolt.server.dashboard.waterfall import MAX_WATERFALL_SPANS, SUMMARY_CHARS, reward_marks, span_kind, waterfall
from agentbolt.types import Attempt, Rollout, Worker, WorkerStatus

__all__ = [
    "INPUT_PREVIEW_CHARS",
    "MAX_WATERFALL_SPANS",
    "MESSAGE_CHARS",
    "RESPONSE_CHARS",
    "SUMMARY_CHARS",
    "WORKER_ALIVE_SECONDS",
    "RunTally",
    "attempt_view",
    "call_views",
    "clip",
    "duration",
    "input_preview",
    "row_steps",
    "metric_series",
    "resource_diffs",
    "resources_view",
    "reward_marks",
    "rollout_row",
    "run_summary",
    "span_kind",
    "waterfall",
    "worker_view",
]

WORKER_ALIVE_SECONDS = 60.0
"""A worker not offline that was heard from this recently counts as alive."""


# ----------------------------------------------------------------------------- rollouts
def rollout_row(rollout: Rollout, latest: Attempt | None) -> dict[str, Any]:
    """One line of the rollouts table. ``latest`` is the rollout's latest attempt, if known."""
    return {
        "rollout_id": rollout.rollout_id,
        "status": rollout.status.value,
        "mode": rollout.mode.value,
        "reward": rollout.reward,
        "created_at": rollout.created_at,
        "start_time": rollout.start_time,
        "end_time": rollout.end_time,
        "duration": duration(rollout.start_time, rollout.end_time),
        "attempt_count": rollout.attempt_count,
        "resources_version": rollout.resources_version
        if rollout.resources_version is not None
        else (latest.resources_version if latest is not None else None),
        "worker_id": latest.worker_id if latest is not None else None,
        "input_preview": input_preview(rollout.input),
    }


def attempt_view(attempt: Attempt) -> dict[str, Any]:
    """An attempt as the store has it, plus its ``duration`` (None while it runs)."""
    out = attempt.model_dump(mode="json")
    out["duration"] = duration(attempt.start_time, attempt.end_time)
    return out


# ----------------------------------------------------------------------------- workers
def worker_view(worker: Worker, now: float) -> dict[str, Any]:
    """A worker with its heartbeat age, whether it is alive, and its kind (the
    ``kind`` it put in its metadata: ``runner``, ``controller``...; else ``unknown``)."""
    age = max(0.0, now - worker.last_heartbeat_time)
    kind = worker.metadata.get("kind")
    return {
        "worker_id": worker.worker_id,
        "status": worker.status.value,
        "last_heartbeat_time": worker.last_heartbeat_time,
        "heartbeat_age": age,
        "alive": worker.status != WorkerStatus.OFFLINE and age <= WORKER_ALIVE_SECONDS,
        "current_rollout_id": worker.current_rollout_id,
        "current_attempt_id": worker.current_attempt_id,
        "kind": kind if isinstance(kind, str) and kind else "unknown",
        "created_at": worker.created_at,
        "metadata": worker.metadata,
    }
