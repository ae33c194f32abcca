"""``KubernetesJobExecutor``: each harnessed program as a Kubernetes Job, on the official client.

::

    harness = Harness("python /app/solve.py", executor=KubernetesJobExecutor(
        "registry.example/agent:1", namespace="rollouts", gateway_url="http://10.0.0.5:8000"))

Per attempt: a Secret with the attempt's scoped token (the pod gets it as
``OPENAI_API_KEY`` from the Secret, not as plain env), a NetworkPolicy that lets the pod
reach the gateway's port and nothing else, and a Job from the template
(:mod:`.manifests`: ``backoffLimit: 0``, ``restartPolicy: Never``,
``activeDeadlineSeconds`` = the harness timeout, ``ttlSecondsAfterFinished``, labels with
the rollout and attempt). Job creation is rate-limited; one watch per executor follows
its Jobs, with a periodic list that reconciles what a dropped watch missed. When the Job
ends its pod's log is kept (the program's output: the host evaluator reads it) and
the three objects are deleted, also on cancellation; a restarted runner deletes the
Jobs a killed one left (:func:`reap_jobs`).

The pod computes its own reward and posts it to ``$AGENTBOLT_REWARD_URL`` (Agent
Lightning's SWE recipe), or an evaluator here judges its log. The workspace is the
image's: nothing of this machine is copied into the pod, nothing back.

Tested against a fake API server speaking the real REST paths
(``tests/fakes/kubernetes_api.py``), never against a cluster.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.isolated import IsolatedExecutor
from agentbolt.runner.harness.kubernetes.client import kubernetes_api
from agentbolt.runner.harness.kubernetes.manifests import DEFAULT_TEMPLATE, dns_name, render_attempt
from agentbolt.runner.harness.kubernetes.rate import RateLimit
from agentbolt.runner.harness.kubernetes.watcher import JobEnd, JobWatcher, reap_jobs
from agentbolt.runner.harness.local import ProcessResult, ProcessSpec, ProgramStartError
from agentbolt.runner.harness.owner import controller_id, is_alive

__all__ = ["ImageNotReadyError", "KubernetesJobExecutor"]

log = logging.getLogger("agentbolt.runner.harness.kubernetes")
MANAGED_BY = "app.kubernetes.io/managed-by"
OWNER = "agentbolt.owner"
ROLLOUT = "agentbolt.rollout-id"
ATTEMPT = "agentbolt.attempt-id"
CONTROLLER = "agentbolt.controller"


class ImageNotReadyError(HarnessConfigError):
    """The cluster cannot run the image (it cannot be pulled, or the check Job failed)."""


class KubernetesJobExecutor(IsolatedExecutor):
    """Run each program as a Job (see the module docstring).

    * ``image`` — the image of tasks that name none (a task's field ``image_field``);
      ``template`` — the Job template (YAML + Jinja2, see :mod:`.manifests`).
    * ``gateway_url`` — the agentbolt server as pods reach it (default: as this
      process does); ``gateway_peers`` — NetworkPolicy peers of the gateway when its URL
      names a host (an address gets an ``ipBlock`` of itself).
    * ``resources`` — the program container's requests/limits
      (``{"limits": {"memory": "2Gi", "cpu": "1"}}``).
    * ``creations_per_second`` — the most Jobs created per second (a burst of as many).
    * ``reconcile_seconds`` — how often the watch is restarted and all Jobs listed.
    * ``owner`` — labels everything made; keep it stable, so a restarted runner deletes
      what a killed one left.
    * ``api_client`` — a ready ``kubernetes.client.ApiClient`` (this process only: runner
      processes started from a pickled harness load the configuration); else the
      kubeconfig (``kubeconfig``, ``context``) or the in-cluster service account is used.
    """

    def __init__(
        self,
        image: str | None = None,
        *,
        namespace: str = "default",
        template: str = DEFAULT_TEMPLATE,
        gateway_url: str | None = None,
        gateway_peers: list[dict[str, Any]] | None = None,
        resources: Mapping[str, Any] | None = None,
        ttl_seconds_after_finished: int = 600,
        creations_per_second: float = 5.0,
        reconcile_seconds: float = 30.0,
        owner: str = "agentbolt",
        api_client: Any = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        image_field: str = "image",
        image_check_timeout: float = 300.0,
        output_limit: int = 1_000_000,
    ) -> None:
        self.image = image
        self.namespace = namespace
        self.template = template
        self.gateway_url = gateway_url.rstrip("/") if gateway_url else None
        self.gateway_peers = gateway_peers
        self.resources = dict(resources or {"requests": {"cpu": "250m", "memory": "256Mi"},
                                            "limits": {"cpu": "1", "memory": "1Gi"}})
        self.ttl = ttl_seconds_after_finished
        self.creations_per_second = creations_per_second
        self.reconcile_seconds = reconcile_seconds
        self.owner = owner
        self.api_client = api_client
        self.kubeconfig = kubeconfig
        self.context = context
        self.image_field = image_field
        self.image_check_timeout = image_check_timeout
        self.output_limit = output_limit
        self._state: _State | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_state"] = None
        state["api_client"] = None  # a client does not travel: each runner process loads the kubeconfig
        return state

    # ------------------------------------------------------------------ IsolatedExecutor
    def program_server_url(self, server_url: str) -> str:
        return self.gateway_url or server_url

    async def prepare(self, task: Any) -> None:
        state = await self._start()
        await state.image_ready(self._image(task))

    async def close(self) -> None:
        if self._state is not None:
            self._state.watcher.stop()

    async def run(self, spec: ProcessSpec) -> ProcessResult:
        if spec.files or (spec.workspace is not None and any(spec.workspace.iterdir())):
            raise HarnessConfigError(
                "KubernetesJobExecutor runs programs in the image's own workspace: nothing of this machine is copied "
                "into the pod, so drop Sandbox(workspace=...) and the task's workspace field (build them into the "
                "image instead)"
            )
        state = await self._start()
        image = self._image(spec.task)
        await state.image_ready(image)
        rollout_id = spec.gateway.rollout_id if spec.gateway else "none"
        attempt_id = spec.gateway.attempt_id if spec.gateway else f"run-{os.urandom(4).hex()}"
        name = dns_name("agentbolt", attempt_id)
        labels = {MANAGED_BY: "agentbolt", OWNER: self.owner, ROLLOUT: _label(rollout_id),
                  ATTEMPT: _label(attempt_id)}
        deadline = int(spec.timeout) if spec.timeout is not None else None
        objects = render_attempt(
            self.template, name=name, namespace=self.namespace, labels=labels,
            annotations={CONTROLLER: controller_id()}, image=image, argv=list(spec.argv), env=spec.env,
            token=spec.env.get("OPENAI_API_KEY", ""), gateway_url=self.program_server_url(
                spec.gateway.server_url if spec.gateway else "http://127.0.0.1"),
            gateway_peers=self.gateway_peers, resources=self.resources, deadline=deadline, ttl=self.ttl,
            task=spec.task,
        )
        started = time.monotonic()
        end_future = state.watcher.expect(name)
        try:
            await state.rate.acquire()
            await asyncio.to_thread(state.api.create_attempt, objects)
            end: JobEnd = await end_future
        finally:
            state.watcher.forget(name)
            await asyncio.shield(asyncio.to_thread(state.api.delete_attempt, name, self.namespace))
        if end.pull_failure:
            raise ProgramStartError(f"the pod of {name} cannot pull {image}: {end.pull_failure}")
        if end.deleted:
            raise ProgramStartError(f"the Job {name} was deleted before it finished (by someone else)")
        logs = end.logs.encode()
        return ProcessResult(
            exit_code=end.exit_code if end.exit_code is not None else (-9 if end.deadline else 1),
            stdout=logs[: self.output_limit],
            stderr_tail=end.logs[-spec.stderr_tail_bytes:] if spec.stderr_tail_bytes else "",
            timed_out=end.deadline, duration=time.monotonic() - started,
            extra={"job": name, "pod": end.pod, "reason": end.reason, "stdout_bytes": len(logs)},
        )

    # ------------------------------------------------------------------ internals
    def _image(self, task: Any) -> str:
        named = task.get(self.image_field) if isinstance(task, Mapping) else None
        image = str(named) if named else self.image
        if not image:
            raise HarnessConfigError(
                f"KubernetesJobExecutor has no image for this task: give KubernetesJobExecutor(image=...) or a task "
                f"field {self.image_field!r}"
            )
        return image

    async def _start(self) -> _State:
        if self._state is None or self._state.pid != os.getpid():
            api = await asyncio.to_thread(kubernetes_api, self.api_client, self.kubeconfig, self.context)
            selector = f"{MANAGED_BY}=agentbolt,{OWNER}={self.owner}"
            await asyncio.to_thread(reap_jobs, api, self.namespace, selector, CONTROLLER, is_alive)
            watcher = JobWatcher(api, self.namespace, selector, self.reconcile_seconds, asyncio.get_running_loop())
            watcher.start()
            self._state = _State(self, api, watcher)
        return self._state


class _State:
    def __init__(self, executor: KubernetesJobExecutor, api: Any, watcher: JobWatcher) -> None:
        self.pid = os.getpid()
        self.executor = executor
        self.api = api
        self.watcher = watcher
        self.rate = RateLimit(executor.creations_per_second)
        self.ready: set[str] = set()
        self.lock = asyncio.Lock()

    async def image_ready(self, image: str) -> None:
        """Once per image: a Job that runs ``/bin/sh -c 'exit 0'`` in it must succeed."""
        if image in self.ready:
            return
        async with self.lock:
            if image in self.ready:
                return
            ex = self.executor
            name = dns_name("agentbolt-check", image.rsplit("/", 1)[-1], os.urandom(3).hex())
            labels = {MANAGED_BY: "agentbolt", OWNER: ex.owner, ROLLOUT: "image-check", ATTEMPT: name}
            objects = render_attempt(
                ex.template, name=name, namespace=ex.namespace, labels=labels,
                annotations={CONTROLLER: controller_id()}, image=image, argv=["/bin/sh", "-c", "exit 0"], env={},
                token="none", gateway_url=ex.gateway_url or "http://127.0.0.1", gateway_peers=ex.gateway_peers,
                resources=ex.resources, deadline=int(ex.image_check_timeout), ttl=ex.ttl, task=None,
            )
            end_future = self.watcher.expect(name)
            try:
                await asyncio.to_thread(self.api.create_attempt, objects)
                end = await asyncio.wait_for(end_future, timeout=ex.image_check_timeout + 30)
            except TimeoutError:
                raise ImageNotReadyError(f"the image check Job for {image} did not finish in "
                                         f"{ex.image_check_timeout:g} s") from None
            finally:
                self.watcher.forget(name)
                await asyncio.shield(asyncio.to_thread(self.api.delete_attempt, name, ex.namespace))
            if end.pull_failure or end.exit_code != 0:
                raise ImageNotReadyError(
                    f"the cluster cannot run {image}: {end.pull_failure or end.reason or f'exit {end.exit_code}'}; "
                    "push it where the nodes pull from (and give the template imagePullSecrets), or fix its name "
                    "(the image needs /bin/sh for this check)"
                )
            self.ready.add(image)


def _label(value: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in value)[:63]
    return cleaned.strip("-_.") or "x"


