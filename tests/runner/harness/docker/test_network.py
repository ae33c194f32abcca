"""Acceptance (issue 28): a program in a Docker container reaches its own gateway and
reward routes and nothing else — another rollout's routes, the admin API, other loopback
ports and outside addresses are refused, and each refusal is recorded."""

from __future__ import annotations

import uuid
from pathlib import Path

from agentbolt.runner.harness import Harness, Sandbox
from agentbolt.runner.harness.docker import ContainerLimits, DockerExecutor
from agentbolt.types import RolloutStatus
from runner.harness.docker.helpers import left_over, sandbox_events
from runner.harness.helpers import Served

PROGRAM = r"""
set -u
exec 1>&2  # what it found, in the attempt's stderr tail
chat=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$OPENAI_BASE_URL/chat/completions" \
  -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
  --data '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}')
echo "own gateway: $chat"
other=$(curl -sS -o /dev/null -w '%{http_code}' "$AGENTBOLT_SERVER_URL/rollout/someone-else/attempt/x/v1/models" \
  -H "Authorization: Bearer $OPENAI_API_KEY")
echo "other rollout: $other"
admin=$(curl -sS -o /dev/null -w '%{http_code}' "$AGENTBOLT_SERVER_URL/v1/rollouts")
echo "admin api: $admin"
if curl -sS --max-time 3 http://127.0.0.1:1/ 2>/dev/null; then echo "port 1: open"; else echo "port 1: refused"; fi
if curl -sS --max-time 3 http://203.0.113.7/ 2>/dev/null; then echo "outside: open"; else echo "outside: refused"; fi
curl -sS -o /dev/null -X POST "$AGENTBOLT_REWARD_URL" -H "Authorization: Bearer $OPENAI_API_KEY" \
  -H 'Content-Type: application/json' --data '{"value": 0.25}'
"""


async def test_only_the_attempts_own_routes_are_reachable(served: Served, base_image: str, tmp_path: Path) -> None:
    (tmp_path / "prog.sh").write_text(PROGRAM)
    owner = f"test-{uuid.uuid4().hex[:8]}"
    executor = DockerExecutor(base_image, owner=owner, limits=ContainerLimits(memory_mb=256, processes=64))
    harness = Harness(["sh", "prog.sh"], server_url=served.url, executor=executor, timeout=60,
                      sandbox=Sandbox(workspace=tmp_path))
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED, rollout
    assert rollout.reward == 0.25  # posted to its own reward route, through the relay
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    facts = attempt.metadata["harness"]
    assert facts["harness.sandboxed"] is True
    found = dict(line.split(": ", 1) for line in facts["harness.stderr_tail"].splitlines() if ": " in line)
    assert found == {"own gateway": "200", "other rollout": "403", "admin api": "403", "port 1": "refused",
                     "outside": "refused"}
    events = await sandbox_events(served, rollout)
    assert "/rollout/someone-else/" in events["network.denied"] or "/v1/rollouts" in events["network.denied"]
    denied = [e for e in attempt.metadata["sandbox"]["events"] if e["kind"] == "network.denied"]
    assert {d["detail"].split(" ")[1].split("/")[1] for d in denied} >= {"rollout", "v1"}
    assert "network.refused" in events  # 127.0.0.1:1 inside the container: nothing listens
    assert "network.unreachable" in events  # no route out of --network none: no packet left
    assert left_over(owner) == []
