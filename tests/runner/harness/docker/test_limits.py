"""Acceptance (issue 28): the memory, process and wall-time limits end the whole
container — a background process of the program does not survive one of its processes
hitting a limit — and each is recorded as a sandbox event."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agentbolt.runner.harness import Harness, Sandbox
from agentbolt.runner.harness.docker import ContainerLimits, DockerExecutor
from agentbolt.types import RolloutStatus
from runner.harness.docker.helpers import left_over, sandbox_events
from runner.harness.helpers import Served

# a background process keeps writing; the main one hits the limit in a child and would
# then write "survived" if only that child were killed
PROGRAMS = {
    "memory": r"""
(while true; do date +%s%N >> beat; sleep 0.1; done) &
python3 -c 'b = []
while True: b.append(bytearray(16 << 20))' || true
sleep 3; echo survived > survived
""",
    "processes": r"""
(while true; do date +%s%N >> beat; sleep 0.1; done) &
python3 -c 'import os, time
for _ in range(200):
    try:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    except OSError:
        pass  # refused at the limit: a program that carries on (busybox sh would exit here)
time.sleep(3)'
echo survived > survived
""",
    "wall_time": r"""
(while true; do date +%s%N >> beat; sleep 0.1; done) &
sleep 60; echo survived > survived
""",
}
GRADER = """
import os, pathlib
ws = pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"])
print(0.0 if (ws / "survived").exists() else 1.0)
"""


@pytest.mark.parametrize(("limit", "event"), [("memory", "limit.memory"), ("processes", "limit.processes")])
async def test_a_limit_kills_the_whole_container(
    served: Served, base_image: str, tmp_path: Path, limit: str, event: str
) -> None:
    (tmp_path / "prog.sh").write_text(PROGRAMS[limit])
    grader = tmp_path.parent / f"grade-{limit}.py"
    grader.write_text(GRADER)
    owner = f"test-{uuid.uuid4().hex[:8]}"
    executor = DockerExecutor(base_image, owner=owner, limits=ContainerLimits(memory_mb=96, processes=48))
    harness = Harness(["sh", "prog.sh"], evaluator=["python3", str(grader)], server_url=served.url,
                      executor=executor, timeout=60, sandbox=Sandbox(workspace=tmp_path))
    [rollout] = await served.run(harness, [{"q": 1}])
    # a limit is the program's outcome, not an infrastructure failure: the evaluator judges what it left
    assert rollout.status == RolloutStatus.SUCCEEDED, rollout
    assert rollout.reward == 1.0  # nothing of the container ran on to write "survived"
    events = await sandbox_events(served, rollout)
    assert event in events, events
    assert "whole container" in events[event]
    assert left_over(owner) == []


async def test_the_wall_time_kills_the_whole_container_and_the_attempt_is_retried(
    served: Served, base_image: str, tmp_path: Path
) -> None:
    (tmp_path / "prog.sh").write_text(PROGRAMS["wall_time"])
    owner = f"test-{uuid.uuid4().hex[:8]}"
    executor = DockerExecutor(base_image, owner=owner)
    harness = Harness(["sh", "prog.sh"], server_url=served.url, executor=executor, timeout=2,
                      sandbox=Sandbox(workspace=tmp_path))
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.FAILED
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert attempt.metadata["harness"]["harness.timed_out"] is True
    assert "limit.wall_time" in await sandbox_events(served, rollout)
    assert left_over(owner) == []
