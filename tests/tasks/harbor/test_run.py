"""Harbor tasks on the real Docker executor: the environment built from the task's
Dockerfile, the program given the instruction, tests/test.sh after it inside, the reward
from /logs/verifier (named rewards kept, nothing the program planted counted)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from runner.harness.docker.helpers import left_over
from runner.harness.helpers import Served, served  # noqa: F401 - the fixture

from agentbolt import semconv
from agentbolt.runner.harness.docker import DockerExecutor
from agentbolt.tasks.harbor import HarborImageError, docker_inputs, harbor_harness, load, ready, task_limits
from agentbolt.types import RolloutStatus
from tasks.harbor.docker_engine import EXAMPLES, copy_task, host_base_image, needs_docker  # noqa: F401

pytestmark = needs_docker

# sees the instruction, never the tests or where they are; plants a reward of its own;
# solves fix-constant but also edits another line of the script
PROGRAM = r"""
[ -e /tests ] && exit 3
case "$AGENTBOLT_TASK" in *task_dir*|*test.sh*|*harbor_verifier*) exit 4;; esac
mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt
case "$1" in *area.py*) sed -i 's/^PI = .*/PI = 3.14159/' /app/area.py && echo '# edited' >> /app/area.py;; esac
"""


async def test_the_verifier_runs_inside_after_the_program_and_its_named_rewards_stay_named(
    served: Served, host_base_image: str  # noqa: F811
) -> None:
    tasks = [t for t in load(EXAMPLES) if t.name in ("agentbolt/fix-constant", "agentbolt/write-greeting")]
    owner = f"test-{uuid.uuid4().hex[:8]}"
    limits = task_limits(tasks)  # what DockerExecutor gets by default; here one with its own owner label
    assert limits.memory_mb == 512 and limits.cpus == 1.0
    harness = harbor_harness(tasks, ["sh", "-c", PROGRAM, "sh", "{instruction}"], server_url=served.url,
                             executor=DockerExecutor(owner=owner, limits=limits))
    assert harness.timeout == 120.0 and harness.evaluator_timeout == 90.0
    fix, greet = await served.run(harness, docker_inputs(tasks))
    assert fix.status == greet.status == RolloutStatus.SUCCEEDED, (fix, greet)
    spans = await served.store.get_spans(fix.rollout_id, fix.latest_attempt_id)
    [reward] = [s for s in spans if s.name == semconv.REWARD_SPAN]
    assert reward.attributes[semconv.REWARD_PREFIX + "reward"] == 1.0  # the output is right ...
    assert reward.attributes[semconv.REWARD_PREFIX + "unchanged"] == 0.0  # ... but another line changed
    assert fix.reward == 1.0
    assert greet.reward == 0.0  # the reward.txt the program wrote itself was removed before test.sh ran
    assert left_over(owner) == []


def test_a_base_image_that_is_not_here_is_named_before_anything_is_built(tmp_path: Path,
                                                                          host_base_image: str) -> None:  # noqa: F811
    task_dir = copy_task("write-greeting", tmp_path)
    (task_dir / "environment" / "Dockerfile").write_text("FROM agentbolt-missing:never\nWORKDIR /app\n")
    tasks = load(task_dir)
    with pytest.raises(HarborImageError, match="'agentbolt-missing:never'"):
        ready(tasks, harbor_harness(tasks, ["true"]))
