"""Acceptance (issue 28): the Job executor's lifecycle against a fake API server that
speaks the real REST paths (``tests/fakes/kubernetes_api.py``: its kubelet runs each
pod as a local process): create → running → succeeded (the pod posts its reward over
HTTP) / failed / deadline / deleted by someone else; logs kept; everything deleted
after; a restart deletes the Jobs a killed runner left; a missing image is one error.
Untested on a real cluster."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes", reason="the Kubernetes client is not installed (pip install 'agentbolt[k8s]')")
pytest.importorskip("jinja2", reason="jinja2 is not installed (pip install 'agentbolt[k8s]')")
from fakes.kubernetes_api import FakeCluster

from agentbolt.runner.harness import Harness, ProcessSpec
from agentbolt.runner.harness.kubernetes import ImageNotReadyError, KubernetesJobExecutor, validate
from agentbolt.types import RolloutStatus
from runner.harness.helpers import Served
from runner.harness.kubernetes.conftest import IMAGE

REWARD_FROM_THE_POD = (
    "import json, os, urllib.request; print('solving', os.environ['AGENTBOLT_TASK']);"
    "req = urllib.request.Request(os.environ['AGENTBOLT_REWARD_URL'], data=json.dumps(dict(value=0.75)).encode(),"
    " headers=dict([('Authorization', 'Bearer ' + os.environ['OPENAI_API_KEY']),"
    " ('Content-Type', 'application/json')]));"
    "urllib.request.urlopen(req).read(); print('posted')"
)


def _executor(api_client: Any, **over: Any) -> KubernetesJobExecutor:
    args: dict[str, Any] = dict(namespace="rollouts", api_client=api_client, reconcile_seconds=1.0,
                                owner="test", gateway_url=None)
    args.update(over)
    return KubernetesJobExecutor(IMAGE, **args)


def _left(cluster: FakeCluster) -> dict[str, list[str]]:
    found = {p: [o["metadata"]["name"] for o in cluster.of(p)] for p in ("jobs", "secrets", "networkpolicies")}
    return {p: names for p, names in found.items() if names}


async def test_a_job_runs_posts_its_reward_over_http_and_is_deleted(
    served: Served, cluster: FakeCluster, api_client: Any
) -> None:
    harness = Harness([sys.executable, "-c", REWARD_FROM_THE_POD], server_url=served.url, sandbox=False,
                      executor=_executor(api_client), timeout=60)
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED, rollout
    assert rollout.reward == 0.75
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert "posted" in attempt.metadata["harness"]["harness.stderr_tail"]  # the pod's log, kept in the attempt
    kinds = [o["kind"] for o in cluster.created if not o["metadata"]["name"].startswith("agentbolt-check")]
    assert kinds == ["Secret", "NetworkPolicy", "Job"]  # the pod never starts without its token and its policy
    for manifest in cluster.created:  # what the API server received, too
        validate(manifest)
    job = next(o for o in cluster.created if o["kind"] == "Job" and not o["metadata"]["name"].startswith("agentbolt-c"))
    assert job["metadata"]["labels"]["agentbolt.rollout-id"] == rollout.rollout_id
    assert _left(cluster) == {}


async def test_a_failing_job_fails_the_attempt_with_its_exit_code(
    served: Served, cluster: FakeCluster, api_client: Any
) -> None:
    harness = Harness([sys.executable, "-c", "import sys; print('broken'); sys.exit(3)"], server_url=served.url,
                      sandbox=False, executor=_executor(api_client), timeout=60)
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.FAILED
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert attempt.metadata["harness"]["harness.exit_code"] == 3
    assert _left(cluster) == {}


async def test_the_deadline_ends_the_job_as_a_timeout(served: Served, cluster: FakeCluster, api_client: Any) -> None:
    harness = Harness([sys.executable, "-c", "import time; time.sleep(60)"], server_url=served.url, sandbox=False,
                      executor=_executor(api_client), timeout=1)
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.FAILED
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert attempt.metadata["harness"]["harness.timed_out"] is True
    assert _left(cluster) == {}


async def test_a_job_deleted_by_someone_else_ends_the_run(cluster: FakeCluster, api_client: Any) -> None:
    executor = _executor(api_client)
    run = asyncio.ensure_future(executor.run(ProcessSpec(argv=[sys.executable, "-c", "import time; time.sleep(60)"],
                                                         env={}, timeout=120)))
    def programs() -> list[tuple[str, str]]:  # the attempt's Job, not the image check that runs first
        return [key for key in list(cluster.processes) if not key[1].startswith("agentbolt-check")]

    while not programs():
        await asyncio.sleep(0.05)
    [(namespace, name)] = programs()
    cluster.delete_job(namespace, name)
    with pytest.raises(OSError, match="was deleted before it finished"):
        await run
    assert _left(cluster) == {}
    await executor.close()


async def test_a_cancelled_run_deletes_its_objects(cluster: FakeCluster, api_client: Any) -> None:
    executor = _executor(api_client)
    run = asyncio.ensure_future(executor.run(ProcessSpec(argv=[sys.executable, "-c", "import time; time.sleep(60)"],
                                                         env={}, timeout=120)))
    while not cluster.processes:
        await asyncio.sleep(0.05)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert _left(cluster) == {}
    await executor.close()


KILLED_RUNNER = """
import asyncio, sys
from kubernetes import client
from agentbolt.runner.harness import ProcessSpec
from agentbolt.runner.harness.kubernetes import KubernetesJobExecutor
config = client.Configuration()
config.host = sys.argv[1]
executor = KubernetesJobExecutor(sys.argv[2], namespace="rollouts", api_client=client.ApiClient(config), owner="test")
asyncio.run(executor.run(ProcessSpec(argv=[sys.executable, "-c", "import time; time.sleep(60)"], env={}, timeout=120)))
"""


async def test_a_restarted_runner_deletes_the_jobs_a_killed_one_left(
    cluster: FakeCluster, api_client: Any, tmp_path: Path
) -> None:
    script = tmp_path / "runner.py"
    script.write_text(KILLED_RUNNER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    proc = subprocess.Popen([sys.executable, str(script), cluster.url, IMAGE], env=env)
    try:
        while not any(name.startswith("agentbolt-run") for _, name in list(cluster.processes)):
            await asyncio.sleep(0.05)
        live = _executor(api_client, owner="test")
        await live.prepare({"q": 1})  # another runner starting: a live runner's Job stays
        assert len(_left(cluster)["jobs"]) == 1
        await live.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert set(_left(cluster)) == {"jobs", "secrets", "networkpolicies"}  # kill -9: nothing deleted them
    restarted = _executor(api_client)
    await restarted.prepare({"q": 1})  # on start: the orphans go
    assert _left(cluster) == {}
    await restarted.close()


async def test_a_missing_image_is_one_clear_error(cluster: FakeCluster, api_client: Any) -> None:
    executor = KubernetesJobExecutor("registry.example/missing:9", namespace="rollouts", api_client=api_client,
                                     reconcile_seconds=1.0, owner="test")
    with pytest.raises(ImageNotReadyError, match=r"cannot run registry\.example/missing:9: ErrImagePull"):
        await executor.prepare({"q": 1})
    assert _left(cluster) == {}
    await executor.close()
