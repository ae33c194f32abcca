"""Following the executor's Jobs: one watch for all of them, restarted every
``reconcile_seconds`` after a full list that catches anything a dropped watch missed.

A Job is over when it has a ``Complete`` or ``Failed`` condition (``DeadlineExceeded``:
``activeDeadlineSeconds`` ran out), when it disappears (deleted by someone else), or when
its pod cannot pull its image. The watcher then reads the pod's exit code and log and
hands a :class:`JobEnd` to whoever waits for that Job.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["JobEnd", "JobWatcher", "reap_jobs"]

log = logging.getLogger("agentbolt.runner.harness.kubernetes")
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


@dataclass(frozen=True)
class JobEnd:
    exit_code: int | None
    reason: str = ""
    deadline: bool = False
    deleted: bool = False
    pull_failure: str = ""
    logs: str = ""
    pod: str = ""


class JobWatcher:
    def __init__(self, api: Any, namespace: str, selector: str, reconcile_seconds: float,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.api = api
        self.namespace = namespace
        self.selector = selector
        self.reconcile_seconds = reconcile_seconds
        self.loop = loop
        self.waiting: dict[str, asyncio.Future[JobEnd]] = {}
        self.seen: set[str] = set()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="agentbolt-job-watch", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def expect(self, name: str) -> asyncio.Future[JobEnd]:
        """A future for the end of the Job ``name`` (call before creating it)."""
        future: asyncio.Future[JobEnd] = self.loop.create_future()
        with self.lock:
            self.waiting[name] = future
        return future

    def forget(self, name: str) -> None:
        with self.lock:
            self.waiting.pop(name, None)
            self.seen.discard(name)

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                version = self._reconcile()
                for event in self.api.watch_jobs(self.namespace, self.selector, version,
                                                 max(1, int(self.reconcile_seconds))):
                    if self.stopped.is_set():
                        return
                    job = event["object"]
                    if event["type"] == "DELETED":
                        self._finish(job.metadata.name, JobEnd(None, "deleted", deleted=True))
                    else:
                        self._look_at(job)
            except Exception as exc:  # noqa: BLE001 - the API hiccups; the next reconcile catches up
                log.warning("watching the Jobs failed (%s); listing them again", exc)
                self.stopped.wait(min(5.0, self.reconcile_seconds))

    def _reconcile(self) -> str:
        jobs, version = self.api.list_jobs(self.namespace, self.selector)
        present = {job.metadata.name for job in jobs}
        with self.lock:
            gone = [n for n in self.waiting if n in self.seen and n not in present]
        for name in gone:
            self._finish(name, JobEnd(None, "deleted", deleted=True))
        for job in jobs:
            self._look_at(job, check_pods=True)
        return version

    def _look_at(self, job: Any, *, check_pods: bool = False) -> None:
        name = job.metadata.name
        with self.lock:
            if name not in self.waiting:
                return
            self.seen.add(name)
        conditions = {c.type: c for c in (job.status.conditions if job.status else None) or [] if c.status == "True"}
        ended = conditions.get("Failed") or conditions.get("Complete")
        if ended is None:
            if check_pods:
                failure = self._pull_failure(name)
                if failure:
                    self._finish(name, JobEnd(None, "image", pull_failure=failure))
            return
        pods = self.api.pods_of(name, self.namespace)
        pod = pods[0] if pods else None
        code = _exit_code(pod)
        logs = self.api.pod_log(pod.metadata.name, self.namespace) if pod is not None else ""
        reason = str(ended.reason or ended.type)
        self._finish(name, JobEnd(code, reason, deadline=reason == "DeadlineExceeded", logs=logs,
                                  pod=pod.metadata.name if pod is not None else ""))

    def _pull_failure(self, name: str) -> str:
        for pod in self.api.pods_of(name, self.namespace):
            for status in (pod.status.container_statuses if pod.status else None) or []:
                waiting = status.state.waiting if status.state else None
                if waiting is not None and waiting.reason in PULL_FAILURES:
                    return f"{waiting.reason}: {waiting.message or ''}".strip()
        return ""

    def _finish(self, name: str, end: JobEnd) -> None:
        with self.lock:
            future = self.waiting.get(name)
        if future is not None:
            self.loop.call_soon_threadsafe(_resolve, future, end)


def _resolve(future: asyncio.Future[JobEnd], end: JobEnd) -> None:
    if not future.done():
        future.set_result(end)


def _exit_code(pod: Any) -> int | None:
    if pod is None or pod.status is None:
        return None
    for status in pod.status.container_statuses or []:
        if status.name == "program" and status.state is not None and status.state.terminated is not None:
            return int(status.state.terminated.exit_code)
    return None


def reap_jobs(api: Any, namespace: str, selector: str, annotation: str, alive: Callable[[str], bool]) -> list[str]:
    """Delete the Jobs (with their Secrets and NetworkPolicies) under ``selector`` whose
    controller (annotation ``annotation``) is gone; their names."""
    jobs, _ = api.list_jobs(namespace, selector)
    names = [job.metadata.name for job in jobs
             if not alive(((job.metadata.annotations or {}).get(annotation)) or "")]
    for secret in api.core.list_namespaced_secret(namespace, label_selector=selector).items:
        if not alive((secret.metadata.annotations or {}).get(annotation) or "") and secret.metadata.name.endswith(
                "-token"):
            names.append(secret.metadata.name[: -len("-token")])
    names = sorted(set(names))
    for name in names:
        api.delete_attempt(name, namespace)
    if names:
        log.warning("deleted %d Job(s) left by a runner that is gone: %s", len(names), ", ".join(names))
    return names
