"""The runner: claim rollouts, run the agent on each, report what happened.

For every claimed attempt the runner fetches the rollout's resources version, opens a
trace (``tracer.attempt``) so every span the agent makes lands in this attempt, runs
the agent — async agents as tasks, sync agents in threads — and heartbeats while it
runs. The heartbeat's answer says whether the attempt is still wanted: if the store
timed it out, it was cancelled or another attempt took over, the agent is stopped (see
:mod:`agentbolt.runner.calls` for how, and its limits). The runner also enforces the
rollout's ``timeout_seconds`` itself. When the agent is done the tracer is flushed —
all spans are stored — and then the outcome is reported: succeeded, or failed with an
exception span and the traceback. So an attempt the store shows as succeeded has all its
spans stored: if some could not be stored (the store was down for longer than the
tracer's retries), the attempt is reported failed as retryable instead, and the rollout
runs again with a complete trace. A success that made no recorded model call is warned
about (:mod:`agentbolt.runner.no_model_call`).

Up to ``concurrency`` attempts run at once. Stopping (the ``stop`` event, or
cancelling :meth:`Runner.run`, e.g. Ctrl-C) claims nothing more, lets running attempts
finish for ``shutdown_grace`` seconds, then stops the rest and reports them failed as
retryable, so the store gives them to another runner.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.trace import Status, StatusCode

from agentbolt.runner.agent import RunnableAgent, as_agent, split_result
from agentbolt.runner.calls import AgentCall, start_call
from agentbolt.runner.error_log import PROCESS_ERRORS, FirstSeenErrors
from agentbolt.runner.gateway_llm import resolve_gateway_llms
from agentbolt.runner.hooks import HookSet
from agentbolt.runner.job import (
    SHUTDOWN,
    TIMEOUT,
    Job,
    RunnerStats,
    Stopped,
    deadline_of,
    default_worker_id,
    heartbeat_interval,
    outcome_of,
)
from agentbolt.runner.no_model_call import warn_if_no_model_call
from agentbolt.runner.report import Handoff, send_outcome
from agentbolt.runner.resources import ResourcesCache
from agentbolt.store.base import Store
from agentbolt.tracing.emitters import (
    emit_exception,
    emit_output,
    emit_reward,
    output_metadata,
)
from agentbolt.tracing.tracer import Tracer
from agentbolt.types import AttemptStatus, Claim, Resources, Rollout, WorkerStatus

__all__ = ["Runner"]

log = logging.getLogger("agentbolt.runner")

SPAN_RETRIES = 10
"""Retries of a span batch by the runner's own tracer (backoff 0.1 s doubling, at most
5 s apart: 30 to 40 s of store outage over HTTP, each try retrying too) — patient enough
for a server restart, like reporting outcomes."""


class Runner:
    """Runs an agent on rollouts claimed from a store.

    ``agent`` (or ``run_fn``, the same thing under the name some guides use:
    :data:`agentbolt.aliases.KEYWORDS`) is any form
    :func:`agentbolt.runner.agent.as_agent` accepts. ``store`` may be left out when a
    :class:`~agentbolt.Trainer` runs the runner (it supplies the store). ``hooks`` is one
    hooks object or a sequence of them. ``report_patience`` — seconds an attempt's outcome
    is sent again while the store is unreachable (a server restarting) before it is given
    up (the attempt then times out as unresponsive and is retried).
    """

    def __init__(
        self,
        agent: Any = None,
        *,
        run_fn: Any = None,
        store: Store | None = None,
        concurrency: int = 4,
        worker_id: str | None = None,
        hooks: Any = (),
        tracer: Tracer | None = None,
        heartbeat_interval: float = 2.0,
        poll_interval: float = 0.2,
        shutdown_grace: float = 10.0,
        stop_grace: float = 1.0,
        report_patience: float = 60.0,
    ) -> None:
        if agent is not None and run_fn is not None:
            raise TypeError("pass the agent either as `agent` or as `run_fn`, not both")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if heartbeat_interval <= 0 or poll_interval <= 0:
            raise ValueError("heartbeat_interval and poll_interval must be positive (seconds)")
        source = agent if agent is not None else run_fn
        self._agent: RunnableAgent | None = as_agent(source) if source is not None else None
        self.store = store
        self.concurrency = concurrency
        self.worker_id = worker_id or default_worker_id()
        self.hooks_source = hooks
        self.hooks = HookSet(hooks, agent=self._agent.source if self._agent is not None else None, runner=self)
        self.tracer = tracer
        self.heartbeat_interval = heartbeat_interval
        self.poll_interval = poll_interval
        self.shutdown_grace = shutdown_grace
        self.stop_grace = stop_grace
        self.report_patience = report_patience
        self._resources = ResourcesCache(lambda version: self._store.get_resources(version))
        self._running = False
        self._failures = FirstSeenErrors()
        """This runner's agent failures by kind, for the summary it logs when it stops."""

    @property
    def agent(self) -> RunnableAgent | None:
        return self._agent

    # ------------------------------------------------------------------------ main loop
    async def run(
        self,
        *,
        max_rollouts: int | None = None,
        stop_when_idle: bool = False,
        stop: asyncio.Event | None = None,
    ) -> RunnerStats:
        """Claim and run rollouts until ``stop`` is set, ``max_rollouts`` have been run,
        or (``stop_when_idle``) the queue is empty and nothing is running."""
        if self._agent is None:
            raise TypeError("this Runner has no agent: Runner(agent) or Runner(run_fn=fn)")
        if self.store is None:
            raise TypeError("this Runner has no store: pass store=... or run it through agentbolt.Trainer")
        if self._running:
            raise RuntimeError("this Runner is already running; raise `concurrency` or make another Runner")
        self._running = True
        stop = stop or asyncio.Event()
        stats = RunnerStats(worker_id=self.worker_id)
        started = time.monotonic()
        store = self.store
        await store.start()
        tracer, own_tracer = self.tracer, False
        if tracer is None:
            # patient with the store: a span batch is retried for half a minute (a server
            # restarting) before the attempt is given up as SpansNotStored
            tracer, own_tracer = Tracer(store, max_retries=SPAN_RETRIES), True
        tracer.start()
        jobs: dict[asyncio.Task[None], Job] = {}
        stop_waiter = asyncio.ensure_future(stop.wait())

        active: Tracer = tracer

        def start(claim: Claim) -> None:
            job = Job(claim, deadline_of(claim.rollout))
            name = f"rollout-{claim.rollout.rollout_id}"
            jobs[asyncio.create_task(self._execute(job, active, stats, handoff), name=name)] = job
            stats.claimed += 1

        # a job that ends reports with a claim of its successor when it may (see runner.report)
        handoff = Handoff(self.worker_id, stop, stats, max_rollouts, start)
        try:
            await self._register(WorkerStatus.IDLE)
            try:
                await self._loop(jobs, handoff, stop_waiter, stop_when_idle)
            finally:
                handoff.closed = True
            if jobs:
                await self._drain(jobs, grace=self.shutdown_grace if stop.is_set() else None)
        except asyncio.CancelledError:
            if jobs:
                log.warning("runner %s interrupted: stopping %d running attempt(s)", self.worker_id, len(jobs))
                await self._drain(jobs, grace=0.0)
            raise
        finally:
            stop_waiter.cancel()
            await self._register(WorkerStatus.OFFLINE)
            if own_tracer:
                await tracer.aclose()
            stats.elapsed = time.monotonic() - started
            self._running = False
            failures = self._failures.summary()
            if failures is not None:
                log.warning("runner %s: %d of %d attempts failed: %s", self.worker_id, stats.failed,
                            stats.claimed, failures)
        return stats

    async def _loop(
        self, jobs: dict[asyncio.Task[None], Job], handoff: Handoff, stop_waiter: asyncio.Future[Any], until_idle: bool
    ) -> None:
        stats, stop, max_rollouts = handoff.stats, handoff.stop, handoff.max_rollouts
        failures = 0
        request_id: str | None = None
        while not stop.is_set():
            room = self.concurrency - len(jobs)
            if max_rollouts is not None:  # successors being claimed with reports count too
                room = min(room, max_rollouts - stats.claimed - handoff.reserved)
            claims: list[Claim] = []
            claim_failed = False
            if room > 0:
                # a claim that failed is sent again with its request id: if the store did
                # take it (and the answer was lost) it hands back the same attempts instead
                # of leaving them to time out
                request_id = request_id or uuid.uuid4().hex
                try:
                    claims = await self._store.claim_rollouts(self.worker_id, room, request_id)
                    failures, request_id = 0, None
                except Exception as exc:  # noqa: BLE001 — the store is down: keep trying, slower
                    claim_failed = True
                    failures += 1
                    log.warning(
                        "runner %s could not claim work (%s: %s); retrying", self.worker_id, type(exc).__name__, exc
                    )
                for claim in claims:
                    handoff.start(claim)
            limit_reached = max_rollouts is not None and stats.claimed >= max_rollouts
            if limit_reached and not jobs:
                return
            if until_idle and room > 0 and not claims and not claim_failed and not jobs:
                return
            if claims and len(claims) == room and not limit_reached:
                await asyncio.sleep(0)  # the queue may hold more: claim again right away
                continue
            can_claim = not limit_reached and len(jobs) < self.concurrency
            timeout = min(self.poll_interval * (2 ** min(failures, 5)), 5.0) if can_claim else None
            done, _ = await asyncio.wait({*jobs, stop_waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            self._reap(jobs, done)

    def _reap(self, jobs: dict[asyncio.Task[None], Job], done: set[Any]) -> None:
        for task in done:
            if task in jobs:
                del jobs[task]
                if not task.cancelled() and task.exception() is not None:
                    log.error(
                        "runner %s: internal error while running a rollout", self.worker_id, exc_info=task.exception()
                    )

    async def _drain(self, jobs: dict[asyncio.Task[None], Job], grace: float | None) -> None:
        """Wait for running attempts (up to ``grace`` s), then stop and report the rest."""
        if grace is None or grace > 0:
            done, _ = await asyncio.wait(set(jobs), timeout=grace)
            self._reap(jobs, done)
        if not jobs:
            return
        for job in jobs.values():
            job.request_stop(SHUTDOWN)
        done, _ = await asyncio.wait(set(jobs), timeout=self.stop_grace + 30.0)
        self._reap(jobs, done)
        for task in list(jobs):
            task.cancel()

    async def run_claimed(self, claim: Claim) -> RunnerStats:
        """Run the agent on one attempt claimed by someone else (Agent Lightning's
        ``LitAgentRunner.step``: create a rollout, claim it, run it here): hooks, trace,
        heartbeats, timeout and the reported outcome are those of :meth:`run`. Returns
        once the outcome is stored."""
        if self._agent is None or self.store is None:
            raise TypeError("run_claimed needs a Runner with an agent and a store")
        store = self.store
        await store.start()
        stats = RunnerStats(worker_id=self.worker_id, claimed=1)
        started = time.monotonic()
        tracer, own_tracer = self.tracer, self.tracer is None
        if tracer is None:
            tracer = Tracer(store, max_retries=SPAN_RETRIES)
        tracer.start()
        try:
            await self._execute(Job(claim, deadline_of(claim.rollout)), tracer, stats)
        finally:
            if own_tracer:
                await tracer.aclose()
            stats.elapsed = time.monotonic() - started
        return stats

    # ------------------------------------------------------------------------ one attempt
    async def _execute(self, job: Job, tracer: Tracer, stats: RunnerStats, handoff: Handoff | None = None) -> None:
        rollout, attempt = job.rollout, job.attempt
        error: BaseException | None = None
        resources: Resources | None = None
        try:
            resources = await self._resources_of(rollout)
            await self._beat(job)
            await self.hooks.call("on_rollout_start", rollout=rollout)
        except Exception as exc:  # noqa: BLE001 — the attempt fails with it (reported below)
            error = exc
        with tracer.attempt(rollout, attempt, resources, token=job.claim.token) as traced:
            if error is None and job.stop_reason is None:
                try:
                    await self.hooks.call("on_trace_start", rollout=rollout, attempt=attempt, tracer=tracer)
                    result = await self._run_agent(job, resources)
                    reward, output = split_result(result)
                    if output is not None:
                        emit_output(output)
                        job.output = output_metadata(output)
                    if reward is not None:
                        emit_reward(reward)
                    await self.hooks.call("on_trace_end", rollout=rollout, attempt=attempt, tracer=tracer)
                except Stopped:
                    pass
                except Exception as exc:  # noqa: BLE001 — the agent's error: the attempt fails with it
                    error = exc
            if error is not None and job.stop_reason is None:
                try:
                    emit_exception(error)
                    # the root span shows the failure too (the exception was caught here,
                    # so it never leaves the tracer's block)
                    otel_trace.get_current_span().set_status(
                        Status(StatusCode.ERROR, f"{type(error).__name__}: {error}")
                    )
                except Exception:  # recording the failure must not hide it
                    log.exception("could not record the exception of rollout %s", rollout.rollout_id)
        spans_lost: str | None = None
        try:
            await tracer.flush(attempt.attempt_id)
        except Exception as exc:  # noqa: BLE001 — reported with the outcome
            spans_lost = f"{type(exc).__name__}: {exc}"
            log.warning("spans of rollout %s are incomplete: flush failed (%s)", rollout.rollout_id, spans_lost)
        await self._report(job, error, stats, spans_lost, handoff)
        if error is None and job.stop_reason is None and spans_lost is None:
            await warn_if_no_model_call(self._store, traced)  # it passed: did it call a model?
        if self.hooks.defines("on_rollout_end"):
            await self._rollout_end(job)

    async def _run_agent(self, job: Job, resources: Resources | None) -> Any:
        assert self._agent is not None
        rollout = job.rollout
        entry = self._agent.entry_point(rollout.mode)
        resources = resolve_gateway_llms(resources, self.store, rollout.rollout_id, job.attempt.attempt_id,
                                         job.claim.token)
        args, kwargs = entry.bind(rollout, resources)
        call = job.call = start_call(
            entry.fn, args, kwargs, is_async=entry.is_async, name=f"agentbolt-rollout-{rollout.rollout_id}"
        )
        interval = heartbeat_interval(rollout, self.heartbeat_interval)
        while True:
            timeout = interval
            if job.deadline is not None:
                timeout = min(timeout, job.deadline - time.monotonic())
            if job.stop_reason is None and timeout > 0:
                await asyncio.wait(
                    {call.future, job.stop_requested}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
            if call.future.done():
                if not call.future.cancelled():
                    job.stop_reason = None  # it finished: a stop asked meanwhile is moot
                    return call.future.result()
                if job.stop_reason is None:
                    raise RuntimeError("the agent's task was cancelled from inside the agent, not by agentbolt")
            if job.stop_reason is None and job.deadline is not None and time.monotonic() >= job.deadline:
                job.request_stop(TIMEOUT)
            if job.stop_reason is None:
                await self._beat(job)
            if job.stop_reason is not None:
                await self._stop_agent(job, call)
                raise Stopped(job.stop_reason)

    async def _stop_agent(self, job: Job, call: AgentCall) -> None:
        log.info(
            "stopping rollout %s (attempt %s): %s", job.rollout.rollout_id, job.attempt.attempt_id, job.stop_reason
        )
        call.stop()
        thread = call.thread
        grace_end = time.monotonic() + self.stop_grace
        if thread is not None:  # let the thread unwind, briefly, so its last spans are in the trace
            while thread.is_alive() and time.monotonic() < grace_end:
                await asyncio.sleep(0.01)
        else:
            await asyncio.wait({call.future}, timeout=self.stop_grace)

    async def _beat(self, job: Job) -> None:
        """Heartbeat; if the store no longer wants this attempt, ask to stop it."""
        try:
            attempt = await self._store.heartbeat(job.rollout.rollout_id, job.attempt.attempt_id)
        except Exception as exc:  # noqa: BLE001 — a hiccup: the next beat may get through
            log.warning("heartbeat of rollout %s failed (%s: %s)", job.rollout.rollout_id, type(exc).__name__, exc)
            return
        if not attempt.status.is_active:
            why = attempt.error.message if attempt.error is not None else attempt.status.value
            job.request_stop(f"the store ended the attempt ({attempt.status.value}: {why})")

    async def _report(
        self, job: Job, error: BaseException | None, stats: RunnerStats, spans_lost: str | None, handoff: Handoff | None
    ) -> None:
        rollout = job.rollout
        outcome = outcome_of(job, error, spans_lost, worker_id=self.worker_id)
        if job.stop_reason is not None:
            stats.stopped += 1
        elif outcome is not None and outcome.status is AttemptStatus.SUCCEEDED:
            stats.succeeded += 1
        else:
            stats.failed += 1
        if outcome is None:
            return  # the store already decided this attempt's outcome
        if job.stop_reason is None and error is not None and outcome.error is not None:
            self._failures.record(outcome.error.type, outcome.error.message)
            PROCESS_ERRORS.log_failure(error, type_name=outcome.error.type, rollout_id=rollout.rollout_id)
        elif outcome.error is not None and outcome.error.type == "SpansNotStored":
            log.warning("rollout %s reported failed (retryable): its spans could not be stored", rollout.rollout_id)
        assert self.store is not None
        await send_outcome(self.store, job, outcome, patience=self.report_patience, handoff=handoff)

    async def _rollout_end(self, job: Job) -> None:
        store = self.store
        assert store is not None
        try:
            rollout = await store.get_rollout(job.rollout.rollout_id)
            spans = await store.get_spans(job.rollout.rollout_id, job.attempt.attempt_id)
            await self.hooks.call("on_rollout_end", rollout=rollout, spans=spans)
        except Exception:
            log.exception("on_rollout_end hook failed for rollout %s", job.rollout.rollout_id)

    # ------------------------------------------------------------------------ helpers
    @property
    def _store(self) -> Store:
        """The store, once running (:meth:`run` refuses to start without one)."""
        if self.store is None:
            raise TypeError("this Runner has no store: pass store=... or run it through agentbolt.Trainer")
        return self.store

    async def _resources_of(self, rollout: Rollout) -> Resources | None:
        version = rollout.resources_version
        return None if version is None else await self._resources.get(version)

    async def _register(self, status: WorkerStatus) -> None:
        assert self._agent is not None and self.store is not None
        metadata = {
            "kind": "runner",
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "concurrency": self.concurrency,
            "agent": self._agent.name,
        }
        try:
            await self.store.update_worker(self.worker_id, status=status, metadata=metadata)
        except Exception as exc:
            if status != WorkerStatus.OFFLINE:
                raise
            log.debug("could not mark worker %s offline: %s", self.worker_id, exc)
