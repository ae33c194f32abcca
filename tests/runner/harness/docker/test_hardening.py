"""The container's own restrictions: a read-only root, a non-root user who cannot read
the launch script or forge the init's report, no capabilities, the reward file as the
executor's channel back."""

from __future__ import annotations

import uuid
from pathlib import Path

from agentbolt.runner.harness import Harness
from agentbolt.runner.harness.docker import DockerExecutor
from agentbolt.types import RolloutConfig, RolloutStatus
from runner.harness.docker.helpers import left_over, sandbox_events
from runner.harness.helpers import Served

PROGRAM = r"""
exec 1>&2
echo "uid: $(id -u)"
echo "caps: $(grep CapEff /proc/self/status | tr -d '\t' | cut -d: -f2)"
touch /etc/planted 2>/dev/null && echo "root fs: writable" || echo "root fs: read-only"
touch /tmp/x && echo "tmp: writable"
echo w > /workspace/w && echo "workspace: writable"
cat /run/agentbolt/in/go >/dev/null 2>&1 && echo "launch script: readable" || echo "launch script: hidden"
echo '{{"exit_code": 0}}' > /run/agentbolt/report/report 2>/dev/null && echo "report: forged" || echo "report: safe"
echo 0.5 > "$AGENTBOLT_REWARD_FILE"
touch /usr/x
"""


async def test_a_read_only_root_and_a_non_root_user(served: Served, base_image: str) -> None:
    owner = f"test-{uuid.uuid4().hex[:8]}"
    executor = DockerExecutor(base_image, owner=owner, read_only_root=True, user="65534:65534")
    harness = Harness(["sh", "-c", PROGRAM], server_url=served.url, executor=executor, timeout=30)
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED, rollout
    assert rollout.reward == 0.5  # the reward file, read back through the run directory
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    tail = attempt.metadata["harness"]["harness.stderr_tail"]
    lines = [line for line in tail.splitlines() if ": " in line and not line.startswith(("touch", "sh:"))]
    found = dict(line.split(": ", 1) for line in lines)
    assert found == {"uid": "65534", "caps": "0000000000000000", "root fs": "read-only", "tmp": "writable",
                     "workspace": "writable", "launch script": "hidden", "report": "safe"}
    assert "path.denied" in await sandbox_events(served, rollout)  # "touch: /usr/x: Read-only file system"
    assert left_over(owner) == []


# what the program leaves at its reward file: the executor reads it back from the run
# directory without following a link, without blocking on a FIFO, and no more than a bound
LEFT_AT_THE_REWARD_FILE = {
    "honest": 'echo 0.25 > "$AGENTBOLT_REWARD_FILE"',
    "link_secret": 'ln -s {secret} "$AGENTBOLT_REWARD_FILE"',
    "fifo": 'mkfifo "$AGENTBOLT_REWARD_FILE"',
    "huge": "head -c 2000000 /dev/zero | tr '\\0' 1 > \"$AGENTBOLT_REWARD_FILE\"",
}


async def test_the_reward_file_is_read_back_without_following_blocking_or_no_end(
    served: Served, base_image: str, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("0.99 host-secret\n")
    owner = f"test-{uuid.uuid4().hex[:8]}"
    programs = {attack: line.format(secret=secret) for attack, line in LEFT_AT_THE_REWARD_FILE.items()}
    harness = Harness(["sh", "-c", "{program}"], server_url=served.url, timeout=30,
                      executor=DockerExecutor(base_image, owner=owner))
    tasks = [{"program": programs[attack]} for attack in programs]
    rollouts = await served.run(harness, tasks, config=RolloutConfig(max_attempts=1), concurrency=2)
    by = dict(zip(programs, rollouts, strict=True))
    assert by["honest"].status == RolloutStatus.SUCCEEDED and by["honest"].reward == 0.25
    for attack, kind in (("link_secret", "not a regular file"), ("fifo", "not a regular file"), ("huge", "bytes")):
        rollout = by[attack]
        assert rollout.status == RolloutStatus.FAILED, attack
        attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
        error = str(attempt.error)
        assert "reward file" in error and kind in error and "host-secret" not in error, (attack, error)
    assert secret.read_text() == "0.99 host-secret\n"
    assert left_over(owner) == []
