"""``HttpStore``: the Store interface over the agentbolt server's HTTP API.

A runner, a harness or an algorithm in another process (or on another machine) uses
this exactly like a local store; the server's typed errors are raised again here.

* **Retries.** Connection errors, timeouts, 429 and 5xx are retried with exponential
  backoff and jitter for calls that are safe to repeat — which is nearly all of them:
  enqueue sends client-chosen rollout ids, claims send a request id, spans are keyed by
  span id, attempt updates are idempotent by design. Publishing resources is not, so it
  is retried only when the request certainly never left (connection refused). When the
  retries run out: :class:`~agentbolt.store.errors.StoreUnavailableError`.
* **Batching.** Concurrent claims, span posts, attempt updates (with or without the
  next claim), heartbeats and worker updates from many tasks are coalesced into ``POST /v1/batch`` requests (see
  :mod:`agentbolt.store.http.batching`). Rollout-scoped tokens cannot batch, so batching
  is off for them.
* **Event loops.** One HTTP connection pool per event loop, made on first use, so the
  same object works from successive ``asyncio.run`` calls and from several threads.
* **Several servers.** Given several URLs (servers sharing one PostgreSQL database), the
  store talks to the first and fails over to the next when a call cannot reach it or it
  answers 502/503/504; it stays there until that one fails in turn. The retries above
  apply across servers, so failing over is safe for the same calls.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from pydantic import TypeAdapter

from agentbolt.store.base import Store
from agentbolt.store.errors import NotFoundError, StoreError
from agentbolt.store.http.transport import HttpTransport, _dumps, _LoopState
from agentbolt.types import (
    Attempt,
    AttemptStatus,
    Claim,
    ErrorInfo,
    MetricRecord,
    Page,
    ReportAndClaim,
    Resource,
    Resources,
    Rollout,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
    StoreStats,
    Worker,
    WorkerStatus,
    new_id,
)

__all__ = ["HttpStore"]

MAX_WAIT_SECONDS = 30.0
"""Longest single long-poll the server accepts (``POST /v1/rollouts/wait``)."""

_ROLLOUTS = TypeAdapter(list[Rollout])
_ROLLOUT = TypeAdapter(Rollout)
_ROLLOUT_PAGE = TypeAdapter(Page[Rollout])
_CLAIMS = TypeAdapter(list[Claim])
_REPORT_AND_CLAIM = TypeAdapter(ReportAndClaim)
_ATTEMPT = TypeAdapter(Attempt)
_ATTEMPTS = TypeAdapter(list[Attempt])
_SPANS = TypeAdapter(list[Span])
_SPAN_PAGE = TypeAdapter(Page[Span])
_RESOURCES = TypeAdapter(Resources)
_RESOURCES_PAGE = TypeAdapter(Page[Resources])
_RESOURCE_MAP = TypeAdapter(dict[str, Resource])
_WORKER = TypeAdapter(Worker)
_WORKERS = TypeAdapter(list[Worker])
_STATS = TypeAdapter(StoreStats)
_METRICS = TypeAdapter(list[MetricRecord])
_RUN_IDS = TypeAdapter(list[str])

MAX_METRICS_PER_REQUEST = 10_000
"""Records per ``POST /v1/metrics``; larger calls are sent in several requests."""

MAX_DELETE_IDS_PER_REQUEST = 10_000
"""Rollout ids per ``POST /v1/retention/delete-spans``; longer lists take several requests."""

DELETE_SPANS_TIMEOUT = 600.0
"""Seconds to wait for the answer of one span deletion (a big store takes a while)."""


def _seg(value: str) -> str:
    """One URL path segment. Dots are escaped too, so ids like ``..`` are not
    collapsed by URL normalisation; the server decodes ``%2F`` back to ``/``."""
    return quote(value, safe="").replace(".", "%2E")


class HttpStore(HttpTransport, Store):
    """A :class:`~agentbolt.store.base.Store` served by ``agentbolt server`` at ``base_url``.

    ``base_url`` may also be a sequence of URLs: servers on one shared database, used one
    at a time, in that order, failing over to the next (see the module docstring).
    ``token`` — the admin token, or a rollout-scoped token (then only the calls an agent
    may make work). ``timeout`` — seconds per request. ``max_retries`` — retries of a
    failed call before :class:`StoreUnavailableError`. ``batching`` — coalesce
    concurrent calls (see the module docstring). ``max_connections`` — per event loop.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        token: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 5,
        batching: bool = True,
        max_connections: int = 64,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        if not urls:
            raise ValueError("HttpStore needs at least one server URL")
        for url in urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"HttpStore needs an http:// or https:// URL, got {url!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.base_urls: tuple[str, ...] = tuple(url.rstrip("/") for url in urls)
        self._current = 0
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self.batching = batching and not (token or "").startswith("ab1.")
        self.max_connections = max_connections
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._states_lock = threading.Lock()
        self._server_reports_and_claims: bool | None = None
        """Whether the server has ``report_and_claim`` (servers before it do not): learnt
        from the first call, which goes alone to its route."""

    def __repr__(self) -> str:
        if len(self.base_urls) > 1:
            return f"HttpStore({list(self.base_urls)!r})"
        return f"HttpStore({self.base_url!r})"

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._state()

    async def close(self) -> None:
        """Close this event loop's connections (waiting for batches in flight)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        with self._states_lock:
            state = self._states.pop(loop, None)
        if state is not None:
            if state.batcher is not None:
                await state.batcher.aclose()
            await state.lanes.aclose()

    # ------------------------------------------------------------------ rollouts
    async def enqueue_rollouts(self, rollouts: Sequence[RolloutCreate]) -> list[Rollout]:
        # ids chosen here make a retried enqueue safe: the server stores each id once
        specs = [r if r.rollout_id else r.model_copy(update={"rollout_id": new_id("ro")}) for r in rollouts]
        return _ROLLOUTS.validate_python(await self._request("POST", "/v1/rollouts", {"rollouts": specs}))

    async def claim_rollouts(
        self, worker_id: str | None = None, limit: int = 1, request_id: str | None = None
    ) -> list[Claim]:
        args = _dumps({"worker_id": worker_id, "limit": limit, "request_id": request_id or uuid.uuid4().hex})
        return await self._op("claim_rollouts", args, _CLAIMS, "POST", "/v1/claims", args)

    async def get_rollout(self, rollout_id: str) -> Rollout:
        return _ROLLOUT.validate_python(await self._request("GET", f"/v1/rollouts/{_seg(rollout_id)}"))

    async def query_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus] | None = None,
        mode: RolloutMode | None = None,
        rollout_ids: Sequence[str] | None = None,
        search: str | None = None,
        sort_by: str = "created_at",
        descending: bool = False,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Rollout]:
        body: dict[str, Any] = {
            "status": None if status is None else list(status),
            "mode": mode,
            "rollout_ids": None if rollout_ids is None else list(rollout_ids),
            "sort_by": sort_by,
            "descending": descending,
            "limit": limit,
            "cursor": cursor,
        }
        if search is not None:  # only when used: older servers do not know the field
            body["search"] = search
        return _ROLLOUT_PAGE.validate_python(await self._request("POST", "/v1/rollouts/query", body))

    async def count_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus] | None = None,
        mode: RolloutMode | None = None,
        search: str | None = None,
        cap: int | None = None,
    ) -> int:
        body = {"status": None if status is None else list(status), "mode": mode, "search": search, "cap": cap}
        answer = await self._request("POST", "/v1/rollouts/count", body)
        return int(answer["count"])

    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Rollout:
        body = {"status": status, "metadata": metadata}
        return _ROLLOUT.validate_python(await self._request("PATCH", f"/v1/rollouts/{_seg(rollout_id)}", body))

    async def wait_for_rollouts(self, rollout_ids: Sequence[str], timeout: float | None = None) -> list[Rollout]:
        """Long-polls the server (at most 30 s per request) until every rollout has
        finished or ``timeout`` has passed; returns the finished ones in the order given."""
        ids = list(dict.fromkeys(rollout_ids))
        deadline = None if timeout is None else time.monotonic() + timeout
        finished: dict[str, Rollout] = {}
        while True:
            waiting = [rid for rid in ids if rid not in finished]
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            poll = MAX_WAIT_SECONDS if remaining is None else min(remaining, MAX_WAIT_SECONDS)
            if waiting:
                answer = await self._request(
                    "POST",
                    "/v1/rollouts/wait",
                    {"rollout_ids": waiting, "timeout": poll},
                    timeout=poll + self.timeout,
                )
                finished.update((r.rollout_id, r) for r in _ROLLOUTS.validate_python(answer))
            # the server may answer early (shutdown, restart): keep waiting until our deadline
            if len(finished) == len(ids) or (deadline is not None and time.monotonic() >= deadline):
                return [finished[rid] for rid in ids if rid in finished]

    # ------------------------------------------------------------------ attempts
    async def get_attempt(self, rollout_id: str, attempt_id: str) -> Attempt:
        path = f"/v1/rollouts/{_seg(rollout_id)}/attempts/{_seg(attempt_id)}"
        return _ATTEMPT.validate_python(await self._request("GET", path))

    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        return _ATTEMPTS.validate_python(await self._request("GET", f"/v1/rollouts/{_seg(rollout_id)}/attempts"))

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: AttemptStatus | None = None,
        error: ErrorInfo | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Attempt:
        patch = {"status": status, "error": error, "metadata": metadata}
        path = f"/v1/rollouts/{_seg(rollout_id)}/attempts/{_seg(attempt_id)}"
        args = _dumps({"rollout_id": rollout_id, "attempt_id": attempt_id, **patch})
        return await self._op("update_attempt", args, _ATTEMPT, "PATCH", path, _dumps(patch))

    async def report_and_claim(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: AttemptStatus | None = None,
        error: ErrorInfo | None = None,
        metadata: dict[str, Any] | None = None,
        worker_id: str | None = None,
        limit: int = 1,
        request_id: str | None = None,
    ) -> ReportAndClaim:
        # the request id makes a retry hand back the claims of a first try whose answer was lost
        request_id = request_id or uuid.uuid4().hex
        body = {"status": status, "error": error, "metadata": metadata, "worker_id": worker_id, "limit": limit,
                "request_id": request_id}
        path = f"/v1/rollouts/{_seg(rollout_id)}/attempts/{_seg(attempt_id)}/report-and-claim"
        if self._server_reports_and_claims is None:
            # not known yet whether the server has the call (older ones do not): one call asks
            # its route alone, so that a refusal fails no other call of a batch
            async with self._state().learning:
                if self._server_reports_and_claims is None:
                    try:
                        answer = await self._request("POST", path, raw_body=_dumps(body))
                    except NotFoundError as exc:
                        if not exc.message.startswith("no route"):
                            raise
                        self._server_reports_and_claims = False
                    else:
                        self._server_reports_and_claims = True
                        return _REPORT_AND_CLAIM.validate_python(answer)
        if not self._server_reports_and_claims:  # an older server: the two calls
            return await super().report_and_claim(
                rollout_id, attempt_id, status=status, error=error, metadata=metadata, worker_id=worker_id,
                limit=limit, request_id=request_id,
            )
        args = _dumps({"rollout_id": rollout_id, "attempt_id": attempt_id, **body})
        return await self._op("report_and_claim", args, _REPORT_AND_CLAIM, "POST", path, _dumps(body))

    async def heartbeat(self, rollout_id: str, attempt_id: str) -> Attempt:
        path = f"/v1/rollouts/{_seg(rollout_id)}/attempts/{_seg(attempt_id)}/heartbeat"
        args = _dumps({"rollout_id": rollout_id, "attempt_id": attempt_id})
        return await self._op("heartbeat", args, _ATTEMPT, "POST", path, None)

    # ------------------------------------------------------------------ spans
    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        args = b'{"spans":' + _SPANS.dump_json(list(spans)) + b"}"
        return await self._op("add_spans", args, _SPANS, "POST", "/v1/spans", args)

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | None = None,
        *,
        name: str | None = None,
        limit: int = 1000,
        cursor: str | None = None,
    ) -> Page[Span]:
        params: dict[str, str | int] = {
            k: v for k, v in {"attempt_id": attempt_id, "name": name, "cursor": cursor}.items() if v is not None
        }
        params["limit"] = limit
        answer = await self._request("GET", f"/v1/rollouts/{_seg(rollout_id)}/spans", params=params)
        return _SPAN_PAGE.validate_python(answer)

    async def delete_spans(
        self,
        *,
        before: float | None = None,
        rollout_ids: Sequence[str] | None = None,
        dry_run: bool = False,
    ) -> int:
        """See :meth:`Store.delete_spans` (``POST /v1/retention/delete-spans``, admin only).
        Long id lists go in several requests; each may run for minutes on a large store,
        so it waits up to :data:`DELETE_SPANS_TIMEOUT`. Retrying is safe: spans already
        gone are not counted twice."""
        self._check_delete_filters(before, rollout_ids)
        groups: list[list[str] | None]
        if rollout_ids is None:
            groups = [None]
        else:
            ids = list(dict.fromkeys(rollout_ids))
            groups = [ids[i : i + MAX_DELETE_IDS_PER_REQUEST] for i in range(0, len(ids), MAX_DELETE_IDS_PER_REQUEST)]
        total = 0
        for group in groups:
            body = {"before": before, "rollout_ids": group, "dry_run": dry_run}
            answer = await self._request(
                "POST", "/v1/retention/delete-spans", body, timeout=max(self.timeout, DELETE_SPANS_TIMEOUT)
            )
            total += int(answer["deleted"])
        return total

    # ------------------------------------------------------------------ resources
    async def add_resources(self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None) -> Resources:
        body = {"resources": _RESOURCE_MAP.dump_python(resources, mode="json"), "metadata": metadata}
        return _RESOURCES.validate_python(await self._request("POST", "/v1/resources", body, idempotent=False))

    async def update_resources(
        self, resources: dict[str, Resource], metadata: dict[str, Any] | None = None
    ) -> Resources:
        body = {"resources": _RESOURCE_MAP.dump_python(resources, mode="json"), "metadata": metadata}
        return _RESOURCES.validate_python(await self._request("PATCH", "/v1/resources", body, idempotent=False))

    async def get_resources(self, version: int) -> Resources:
        return _RESOURCES.validate_python(await self._request("GET", f"/v1/resources/{int(version)}"))

    async def get_latest_resources(self) -> Resources | None:
        try:
            return _RESOURCES.validate_python(await self._request("GET", "/v1/resources/latest"))
        except StoreError as exc:
            if exc.status_code == 404:
                return None
            raise

    async def query_resources(self, *, limit: int = 100, cursor: str | None = None) -> Page[Resources]:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        return _RESOURCES_PAGE.validate_python(await self._request("GET", "/v1/resources", params=params))

    # ------------------------------------------------------------------ workers
    async def update_worker(
        self,
        worker_id: str,
        *,
        status: WorkerStatus | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Worker:
        patch = {"status": status, "metadata": metadata}
        args = _dumps({"worker_id": worker_id, **patch})
        path = f"/v1/workers/{_seg(worker_id)}"
        return await self._op("update_worker", args, _WORKER, "POST", path, _dumps(patch))

    async def get_worker(self, worker_id: str) -> Worker:
        return _WORKER.validate_python(await self._request("GET", f"/v1/workers/{_seg(worker_id)}"))

    async def query_workers(self) -> list[Worker]:
        return _WORKERS.validate_python(await self._request("GET", "/v1/workers"))

    # ------------------------------------------------------------------ training metrics
    async def add_metrics(self, records: Sequence[MetricRecord]) -> None:
        # an upsert that merges: sending it twice stores the same, so retries are safe
        batch = list(records)
        for i in range(0, len(batch), MAX_METRICS_PER_REQUEST):
            body = b'{"records":' + _METRICS.dump_json(batch[i : i + MAX_METRICS_PER_REQUEST]) + b"}"
            await self._request("POST", "/v1/metrics", raw_body=body)

    async def query_metrics(
        self, run_id: str, *, after_step: int | None = None, limit: int = 1000
    ) -> list[MetricRecord]:
        params: dict[str, Any] = {"run_id": run_id, "limit": limit}
        if after_step is not None:
            params["after_step"] = max(after_step, -1)
        return _METRICS.validate_python(await self._request("GET", "/v1/metrics", params=params))

    async def metric_runs(self, *, limit: int = 100) -> list[str]:
        return _RUN_IDS.validate_python(await self._request("GET", "/v1/metrics/runs", params={"limit": limit}))

    # ------------------------------------------------------------------ stats & deadlines
    async def stats(self) -> StoreStats:
        return _STATS.validate_python(await self._request("GET", "/v1/stats"))

    async def check_deadlines(self) -> int:
        """Ask the server to expire overdue attempts now (it also does so on its own)."""
        answer = await self._request("POST", "/v1/deadlines/check")
        return int(answer["expired"])

    async def get_secret(self) -> bytes:
        raise StoreError(
            "the store secret is not available over HTTP: the server mints rollout-scoped tokens "
            "itself and returns them in Claim.token"
        )
