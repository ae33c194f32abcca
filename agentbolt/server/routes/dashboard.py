"""The dashboard's read API: small, paginated, filtered server-side (``/v1/dashboard``).

Each route reads the store and shapes the answer with
:mod:`agentbolt.server.dashboard.views`; nothing here writes. Admin only, like the other
read routes. Lists are cursor-paginated as ``{"items": [...], "next_cursor": ...}``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Path, Query, Request, Response

from agentbolt.adapters.match import agent_matcher
from agentbolt.server.dashboard import schemas, views
from agentbolt.server.dashboard.lineage import lineage_view
from agentbolt.server.routes.context import (
    ERROR_RESPONSES,
    AdminOnly,
    RolloutIdPath,
    StoreDep,
    context_of,
)
from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError, NotFoundError
from agentbolt.types import (
    MetricRecord,
    Resources,
    RolloutMode,
    RolloutStatus,
    Span,
    now,
)
from agentbolt.version import __version__

__all__ = ["router", "TOTAL_CAP", "MAX_CALL_SPANS", "MAX_SERIES_RECORDS"]

TOTAL_CAP = 10_000
"""With a search, the rollouts table counts matches up to here (then ``total_capped``)."""
MAX_CALL_SPANS = 20_000
"""Most spans of one attempt read to list its model calls."""
MAX_SERIES_RECORDS = 50_000
"""Most metric records one series (or run summary) request reads."""

router = APIRouter(prefix="/v1/dashboard", tags=["dashboard"], responses=ERROR_RESPONSES, dependencies=[AdminOnly])

SortKey = Literal[
    "created_at", "start_time", "end_time", "reward", "duration", "attempt_count", "updated_at", "rollout_id"
]
AttemptQuery = Annotated[
    str | None, Query(min_length=1, max_length=200, description="An attempt id of the rollout; default: the latest.")
]


def _json(payload: Any) -> Response:
    return Response(orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS), media_type="application/json")


async def _all_records(store: Store, run_id: str, after_step: int | None, most: int) -> tuple[list[MetricRecord], bool]:
    """Records of a run after ``after_step``, at most ``most``; and whether more remain."""
    out: list[MetricRecord] = []
    while True:
        want = min(10_000, most - len(out))
        if want <= 0:
            return out, bool(await store.query_metrics(run_id, after_step=after_step, limit=1))
        page = await store.query_metrics(run_id, after_step=after_step, limit=want)
        out.extend(page)
        if len(page) < want:
            return out, False
        after_step = page[-1].step


async def _attempt_spans(store: Store, rollout_id: str, attempt_id: str | None, most: int) -> tuple[list[Span], bool]:
    """Up to ``most`` spans of one attempt in store order; and whether there were more."""
    spans: list[Span] = []
    cursor: str | None = None
    while len(spans) < most:
        page = await store.query_spans(rollout_id, attempt_id, limit=min(5000, most - len(spans)), cursor=cursor)
        spans.extend(page.items)
        if page.next_cursor is None:
            return spans, False
        cursor = page.next_cursor
    return spans, True


async def _resolve_attempt(store: Store, rollout_id: str, attempt_id: str | None) -> tuple[str | None, float | None]:
    """The attempt to show (the latest by default: None if never claimed) and its start."""
    if attempt_id is None:
        attempt_id = (await store.get_rollout(rollout_id)).latest_attempt_id
        if attempt_id is None:
            return None, None
    attempt = await store.get_attempt(rollout_id, attempt_id)
    return attempt.attempt_id, attempt.start_time


# ---------------------------------------------------------------------------- rollouts
@router.get(
    "/rollouts",
    response_model=schemas.RolloutTable,
    summary="Rollouts table: one page, filtered, searched and sorted, with the total",
)
async def rollouts_table(
    store: StoreDep,
    status: Annotated[list[RolloutStatus] | None, Query(description="Repeat to match any of several.")] = None,
    mode: RolloutMode | None = None,
    search: Annotated[
        str | None, Query(max_length=200, description="Substring of the id or the input's JSON (ASCII case ignored).")
    ] = None,
    sort_by: SortKey = "created_at",
    descending: bool = True,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(max_length=10_000, description="next_cursor of the previous page.")] = None,
) -> Response:
    """``{"items": [row], "next_cursor", "total", "total_capped"}``. A row: ``rollout_id,
    status, mode, reward, created_at, start_time, end_time, duration (None until
    finished), attempt_count, resources_version, worker_id (of the latest attempt),
    input_preview`` (≤120 characters). ``total`` counts every match of the filters (not
    just this page); with a search it stops at 10,000 and ``total_capped`` is true."""
    search = search or None
    page, total = await asyncio.gather(
        store.query_rollouts(
            status=status, mode=mode, search=search, sort_by=sort_by, descending=descending, limit=limit, cursor=cursor
        ),
        store.count_rollouts(status=status, mode=mode, search=search, cap=TOTAL_CAP + 1 if search else None),
    )
    claimed = [r.rollout_id for r in page.items if r.latest_attempt_id is not None]
    latest = await store.get_latest_attempts(claimed) if claimed else {}
    return _json(
        {
            "items": [views.rollout_row(r, latest.get(r.rollout_id)) for r in page.items],
            "next_cursor": page.next_cursor,
            "total": min(total, TOTAL_CAP) if search else total,
            "total_capped": bool(search) and total > TOTAL_CAP,
        }
    )


@router.get(
    "/rollouts/{rollout_id:path}/waterfall",
    response_model=schemas.Waterfall,
    summary="Trace of one attempt, nested for a time axis",
)
async def rollout_waterfall(rollout_id: RolloutIdPath, store: StoreDep, attempt_id: AttemptQuery = None) -> Response:
    """``{"attempt_id", "t0", "spans": [...], "rewards": [...], "truncated"}``: spans
    parent before children, siblings by start; each with ``kind`` (llm, reward, tool,
    agent, other), ``depth``, a ``summary`` and a small ``attributes_preview``. At most
    2,000 spans (then ``truncated``). ``rewards``: ``{time, value, name}`` per reward."""
    resolved, started = await _resolve_attempt(store, rollout_id, attempt_id)
    if resolved is None:
        return _json(views.waterfall([], attempt_id=None, attempt_start=None, truncated=False))
    spans, truncated = await _attempt_spans(store, rollout_id, resolved, views.MAX_WATERFALL_SPANS)
    return _json(views.waterfall(spans, attempt_id=resolved, attempt_start=started, truncated=truncated))


@router.get(
    "/rollouts/{rollout_id:path}/calls",
    response_model=schemas.CallList,
    summary="Model calls of one attempt: prompts, responses, tokens",
)
async def rollout_calls(rollout_id: RolloutIdPath, store: StoreDep, attempt_id: AttemptQuery = None) -> Response:
    """``{"attempt_id", "calls": [...], "truncated"}``, calls by start time. A call seen both by
    the gateway and by the agent's client is listed once (the gateway's, which has the
    policy version). Message texts are clipped to 4,000 characters, responses to 8,000."""
    resolved, _ = await _resolve_attempt(store, rollout_id, attempt_id)
    if resolved is None:
        return _json({"attempt_id": None, "calls": [], "truncated": False})
    spans, truncated = await _attempt_spans(store, rollout_id, resolved, MAX_CALL_SPANS)
    return _json({"attempt_id": resolved, "calls": views.call_views(spans), "truncated": truncated})


@router.get(
    "/rollouts/{rollout_id:path}/lineage",
    response_model=schemas.Lineage,
    summary="One attempt's samples by lineage: conversations, where merging broke and why",
)
async def rollout_lineage(
    rollout_id: RolloutIdPath,
    store: StoreDep,
    attempt_id: AttemptQuery = None,
    agent_match: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Which agents' calls train; default: every one.")
    ] = None,
) -> Response:
    """``{"attempt_id", "agent_match", "samples": [...], "counts", "skipped_calls", "error"}``:
    the attempt's calls merged into samples by :class:`~agentbolt.adapters.SampleAdapter`,
    each sample with its conversation, break cause (``first``, ``new_conversation``,
    ``diverged`` + ``diverged_at`` and ``parent``), agents, calls (trained under
    ``agent_match``) and token counts — no token ids. ``error``: why nothing could be merged."""
    try:
        agent_matcher(agent_match)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from exc
    resolved, _ = await _resolve_attempt(store, rollout_id, attempt_id)
    if resolved is None:
        return _json(lineage_view([], attempt_id=None, agent_match=agent_match))
    spans, _ = await _attempt_spans(store, rollout_id, resolved, MAX_CALL_SPANS)
    return _json(lineage_view(spans, attempt_id=resolved, agent_match=agent_match))


@router.get(
    "/rollouts/{rollout_id:path}", response_model=schemas.RolloutDetail, summary="One rollout with its attempts"
)
async def rollout_detail(rollout_id: RolloutIdPath, store: StoreDep) -> Response:
    """``{"rollout": Rollout, "attempts": [Attempt + duration], "resources_version"}``,
    attempts oldest first; ``resources_version`` is the rollout's pinned version, else
    the one its latest attempt ran with."""
    rollout = await store.get_rollout(rollout_id)
    attempts = await store.query_attempts(rollout_id)
    version = rollout.resources_version
    if version is None and attempts:
        version = attempts[-1].resources_version
    return _json(
        {
            "rollout": rollout.model_dump(mode="json"),
            "attempts": [views.attempt_view(a) for a in attempts],
            "resources_version": version,
        }
    )


# ---------------------------------------------------------------------------- training
def _run_tallies(request: Request) -> dict[str, views.RunTally]:
    """The app's run summaries, kept between polls so each poll reads only new records."""
    state = request.app.state
    if not hasattr(state, "dashboard_run_tallies"):
        state.dashboard_run_tallies = {}
    return state.dashboard_run_tallies


@router.get(
    "/training/runs", response_model=schemas.RunList, summary="Training runs that logged metrics, most recent first"
)
async def training_runs(store: StoreDep, request: Request, limit: Annotated[int, Query(ge=1, le=100)] = 20) -> Response:
    """``{"runs": [{run_id, first_step, last_step, n_records, last_time, keys}]}``. The
    server keeps these between calls and reads only the records logged since (50,000
    at most per run and call: a huge run's counts catch up over a few calls)."""
    tallies = _run_tallies(request)
    runs = []
    for run_id in await store.metric_runs(limit=limit):
        tally = tallies.get(run_id)
        if tally is None:
            tally = tallies[run_id] = views.RunTally(run_id)
        records, _ = await _all_records(store, run_id, tally.resume_after(), MAX_SERIES_RECORDS)
        tally.add(records)
        runs.append(tally.view())
    return _json({"runs": runs})


@router.get(
    "/training/series",
    response_model=schemas.MetricSeries,
    summary="Metric curves of a run, by step (incremental with after_step)",
)
async def training_series(
    store: StoreDep,
    run_id: Annotated[str, Query(min_length=1, max_length=200)],
    keys: Annotated[list[str] | None, Query(description="Repeat for several metrics; default: every one.")] = None,
    after_step: Annotated[int | None, Query(ge=-1, le=2**63 - 1, description="Only newer steps.")] = None,
) -> Response:
    """``{"run_id", "series": {key: [[step, value], ...]}, "last_step", "more"}``. Poll
    with ``after_step`` = the ``last_step`` received to get only new points (then
    ``last_step`` stays put until there are some). A non-finite value logged is null.
    ``more``: the answer stopped at 50,000 records; ask again from ``last_step``."""
    records, more = await _all_records(store, run_id, after_step, MAX_SERIES_RECORDS)
    if not records and after_step is None and run_id not in await store.metric_runs(limit=10_000):
        raise NotFoundError(f"no training run {run_id!r} has logged metrics; see GET /v1/dashboard/training/runs")
    last = records[-1].step if records else after_step
    return _json({"run_id": run_id, "series": views.metric_series(records, keys), "last_step": last, "more": more})


@router.get(
    "/training/rows",
    response_model=schemas.RowSteps,
    summary="Per step of a run: rows in, rows trained, rows dropped by reason",
)
async def training_rows(
    store: StoreDep,
    run_id: Annotated[str, Query(min_length=1, max_length=200)],
    policy: Annotated[str | None, Query(min_length=1, max_length=200, description="A policy of GRPOPolicies.")] = None,
) -> Response:
    """``{"run_id", "steps": [{step, rows_in, rows_trained, dropped: {reason: n}, why_nothing_trained}]}``
    for the steps that logged ``rows/in`` (``<policy>/rows/in`` with ``policy``;
    :mod:`agentbolt.metrics.rows`), from the first 50,000 records."""
    records, _ = await _all_records(store, run_id, None, MAX_SERIES_RECORDS)
    return _json({"run_id": run_id, "steps": views.row_steps(records, f"{policy}/" if policy else "")})


# ---------------------------------------------------------------------------- resources
@router.get(
    "/resources",
    response_model=schemas.ResourceVersionPage,
    summary="Resources versions, newest first, with their prompt templates",
)
async def resources_versions(
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    cursor: Annotated[str | None, Query(max_length=10_000)] = None,
) -> Response:
    """``{"items": [{version, created_at, names, kinds, metadata, prompt_templates}], "next_cursor"}``."""
    page = await store.query_resources(limit=limit, cursor=cursor)
    return _json({"items": [views.resources_view(b) for b in page.items], "next_cursor": page.next_cursor})


@router.get(
    "/resources/{version}/diff",
    response_model=schemas.ResourceDiff,
    summary="What changed in a resources version (unified diffs)",
)
async def resources_diff(
    store: StoreDep,
    version: Annotated[int, Path(ge=1, le=2**53)],
    against: Annotated[int | None, Query(ge=1, le=2**53, description="Default: the previous version.")] = None,
) -> Response:
    """``{"version", "against", "diffs": {name: {before, after, changed, unified}}}`` for
    every prompt template and JSON resource of either version. ``against`` is null
    for version 1 (everything is new)."""
    new = await store.get_resources(version)
    if against is None and version > 1:
        against = version - 1
    old: Resources | None = await store.get_resources(against) if against is not None else None
    return _json({"version": version, "against": against, "diffs": views.resource_diffs(new, old)})


# ---------------------------------------------------------------------------- workers & health
@router.get(
    "/workers",
    response_model=schemas.WorkerList,
    summary="Runners and controllers, with heartbeat age and current rollout",
)
async def workers(store: StoreDep) -> Response:
    """``{"now", "workers": [{worker_id, status, last_heartbeat_time, heartbeat_age,
    alive, current_rollout_id, current_attempt_id, kind, metadata}]}``."""
    t = now()
    return _json({"now": t, "workers": [views.worker_view(w, t) for w in await store.query_workers()]})


@router.get(
    "/summary",
    response_model=schemas.DashboardSummary,
    summary="Health badge: counts by status, queue depth, live workers",
)
async def summary(store: StoreDep, request: Request) -> Response:
    """Cheap enough to poll every few seconds. ``health`` is ``degraded`` (with the
    reasons in ``problems``) when rollouts wait in the queue and no worker is alive."""
    stats, workers = await asyncio.gather(store.stats(), store.query_workers())
    t = now()
    alive = sum(1 for w in workers if views.worker_view(w, t)["alive"])
    problems = []
    if stats.queue_depth and not alive:
        problems.append(f"{stats.queue_depth} rollouts are queued but no worker is alive")
    return _json(
        {
            "health": "degraded" if problems else "ok",
            "problems": problems,
            "store": type(context_of(request).store).__name__,
            "rollouts_by_status": stats.rollouts_by_status,
            "total_rollouts": stats.total_rollouts,
            "queue_depth": stats.queue_depth,
            "workers_alive": alive,
            "workers_total": len(workers),
            "latest_resources_version": stats.latest_resources_version,
            "server_time": t,
            "version": __version__,
        }
    )
