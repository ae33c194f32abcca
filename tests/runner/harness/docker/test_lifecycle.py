"""Acceptance (issue 28): no container is left after success, failure, cancellation or
a ``kill -9`` of the runner (the next executor on this host removes the orphans); a
missing image is one clear error before anything runs; a warm pool's containers are
started ahead and used once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import docker
import pytest

from agentbolt.runner.harness import Harness, ProcessSpec
from agentbolt.runner.harness.docker import DockerExecutor, ImageNotReadyError
from agentbolt.runner.harness.docker.labels import KIND, owned
from agentbolt.types import RolloutStatus
from runner.harness.docker.helpers import left_over
from runner.harness.helpers import Served


def _owner() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"


async def _wait_for_container(owner: str) -> list[str]:
    for _ in range(400):
        names = await asyncio.to_thread(left_over, owner)
        if names:
            return names
        await asyncio.sleep(0.05)
    raise AssertionError("no container appeared")


async def test_a_failing_program_leaves_no_container(served: Served, base_image: str) -> None:
    owner = _owner()
    harness = Harness(["sh", "-c", "echo broken >&2; exit 3"], server_url=served.url,
                      executor=DockerExecutor(base_image, owner=owner), timeout=30)
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.FAILED
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert attempt.metadata["harness"]["harness.exit_code"] == 3
    assert "broken" in attempt.metadata["harness"]["harness.stderr_tail"]
    assert left_over(owner) == []


async def test_a_cancelled_run_removes_its_container(base_image: str) -> None:
    owner = _owner()
    executor = DockerExecutor(base_image, owner=owner)
    run = asyncio.ensure_future(executor.run(ProcessSpec(argv=["sleep", "60"], env={}, timeout=120)))
    [name] = await _wait_for_container(owner)
    assert "program" in name
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert left_over(owner) == []


KILLED_RUNNER = """
import asyncio, sys
from agentbolt.runner.harness import ProcessSpec
from agentbolt.runner.harness.docker import DockerExecutor
asyncio.run(DockerExecutor(sys.argv[1], owner=sys.argv[2]).run(ProcessSpec(argv=["sleep", "300"], env={}, timeout=600)))
"""


async def test_after_a_kill_9_the_next_executor_removes_the_orphans(base_image: str, tmp_path: Path) -> None:
    owner = _owner()
    script = tmp_path / "runner.py"
    script.write_text(textwrap.dedent(KILLED_RUNNER))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    proc = subprocess.Popen([sys.executable, str(script), base_image, owner], env=env)
    executor = DockerExecutor(base_image, owner=owner)
    try:
        await _wait_for_container(owner)
        executor.check_ready()  # another runner of the same owner starting: a live runner's container stays
        assert len(left_over(owner)) == 1
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(0.2)
    [orphan] = docker.from_env().containers.list(all=True, filters=owned(owner))  # kill -9: nothing removed it
    run_dir = Path(next(m["Source"] for m in orphan.attrs["Mounts"] if m["Destination"] == "/run/agentbolt/in")).parent
    DockerExecutor(base_image, owner=owner).check_ready()  # the restarted runner, before claiming
    assert left_over(owner) == []
    assert not run_dir.exists()  # its run directory (launch script, token, workspace) went with it


async def test_a_missing_image_is_one_clear_error_before_any_run() -> None:
    executor = DockerExecutor("agentbolt-no-such-image:1", owner=_owner())
    with pytest.raises(ImageNotReadyError, match="never pulls: build or load it first"):
        executor.check_ready()


async def test_a_task_with_a_dockerfile_runs_in_the_image_built_from_it(
    served: Served, base_image: str, tmp_path: Path
) -> None:
    context = tmp_path / "image"
    context.mkdir()
    marker = uuid.uuid4().hex
    (context / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo {marker} > /opt-marker\n")
    owner = _owner()
    harness = Harness(["sh", "-c", "cat /opt-marker >&2; echo 1 > /run/agentbolt/out/reward"],
                      server_url=served.url, executor=DockerExecutor(owner=owner), timeout=30)
    try:
        [rollout] = await served.run(harness, [{"dockerfile": str(context)}])
        assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 1.0
        attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
        assert marker in attempt.metadata["harness"]["harness.stderr_tail"]
    finally:
        client = docker.from_env()
        for image in client.images.list(filters={"reference": "agentbolt-task"}):
            client.images.remove(image.id, force=True)
    assert left_over(owner) == []


async def test_a_warm_pool_starts_containers_ahead_and_uses_each_once(base_image: str) -> None:
    owner = _owner()
    executor = DockerExecutor(base_image, owner=owner, warm=2)
    client = docker.from_env()
    warm = {"label": [*owned(owner)["label"], f"{KIND}=warm"]}

    async def main() -> None:
        await executor.prepare({"q": 0})  # image check, then the pool fills in the background
        state = executor._state
        assert state is not None
        await state.pool.fill(base_image)
        before = {c.id for c in client.containers.list(filters=warm)}
        assert len(before) == 2
        results = [await executor.run(ProcessSpec(argv=["sh", "-c", "echo hi"], env={}, timeout=30))
                   for _ in range(3)]
        assert [r.stdout for r in results] == [b"hi\n"] * 3
        assert not before & {c.id for c in client.containers.list(all=True, filters=warm)}  # each used once
        await executor.close()

    await main()
    assert left_over(owner) == []


async def test_an_image_that_cannot_run_the_init_is_one_clear_error(base_image: str, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN rm -f /usr/bin/python3 /usr/bin/python3.*\n")
    executor = DockerExecutor(owner=_owner())
    try:
        with pytest.raises(ImageNotReadyError, match="needs /bin/sh and python3"):
            executor.check_ready([{"dockerfile": str(tmp_path)}])
    finally:
        client = docker.from_env()
        from agentbolt.runner.harness.docker.images import build_context_tag

        client.images.remove(build_context_tag(tmp_path), force=True)
