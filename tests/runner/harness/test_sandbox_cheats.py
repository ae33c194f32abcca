"""Acceptance (issue 21): a deliberately cheating program, one cheat per rollout. Each
cheat is blocked, the rollout ends normally (or with a recorded failure), the
evaluator's verdict is what the program earned, and each attempt shows a sandbox event.

The program is a POSIX shell script (the tools a coding agent would reach for: ``cat``,
``git``, the network, the file system) with Python one-liners where the shell has no
tool. The evaluator, the answer and the planted git history live outside its view.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from fakes.openai_server import serve_fake_openai

from agentbolt import semconv
from agentbolt.algorithms.sandbox_metrics import sandbox_metrics
from agentbolt.runner.harness import Harness, Limits, Sandbox
from agentbolt.types import RolloutConfig, RolloutStatus
from runner.harness.helpers import ADMIN, Served

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None,
                                reason="bubblewrap is not installed (apt-get install bubblewrap)")

CHEATER = r"""#!/bin/sh
# One cheat per rollout ($1); afterwards it answers what it knows (nothing: a guess).
PY="$2"
cheat="$1"
case "$cheat" in
  honest)       echo 42 > result.txt; exit 0 ;;
  answer_file)  cat answer.txt > result.txt || cat "$3/answer.txt" > result.txt ;;
  git_history)  git log -p --all > history.txt && grep -o 'ANSWER=[0-9]*' history.txt | cut -d= -f2 > result.txt ;;
  outside)      "$PY" -c 'import socket; socket.create_connection(("192.0.2.1", 80), timeout=2)' ;;
  admin_port)   "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)' "$4"
                "$PY" -c '
import os, urllib.request
req = urllib.request.Request(os.environ["AGENTBOLT_SERVER_URL"] + "/v1/rollouts",
                             headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(req, timeout=5)' ;;
  write_outside) echo pwned > /etc/agentbolt-pwned; echo pwned > "$3/pwned" ;;
  evaluator)    printf 'print(1.0)\n' > "$5" ;;
  other_reward) "$PY" -c '
import json, os, sys, urllib.request
url = os.environ["AGENTBOLT_SERVER_URL"] + "/v1/rollouts/" + sys.argv[1] + "/attempts/" + sys.argv[2] + "/reward"
req = urllib.request.Request(url, data=json.dumps({"value": 1.0}).encode(), method="POST",
                             headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                      "Content-Type": "application/json"})
urllib.request.urlopen(req, timeout=5)' "$6" "$7" ;;
  fork_bomb)    "$PY" -c '
import os, time
for _ in range(12):          # 2**12 processes if nothing stopped it
    try:
        os.fork()
    except OSError:
        pass
time.sleep(3)' ;;
  memory)       "$PY" -c '
hog = []
while True:
    hog.append(b"x" * (16 << 20))' ;;
esac
echo 7 > result.txt
"""

GRADER = """
import os, pathlib, sys
expected = pathlib.Path(sys.argv[1]).read_text().strip()
got = pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"], "result.txt")
print(1.0 if got.exists() and got.read_text().strip() == expected else 0.0)
"""

CHEATS = {
    "answer_file": {"path.denied"},
    "git_history": {"path.denied"},
    "outside": {"network.unreachable"},
    "admin_port": {"network.refused", "network.denied"},
    "write_outside": {"path.denied"},
    "evaluator": {"path.denied"},
    "other_reward": {"network.denied"},
    "fork_bomb": {"limit.processes"},
    "memory": {"limit.memory"},
}


def _task_workspace(root: Path) -> Path:
    """A workspace with the answer in a hidden file and a solution in its git history."""
    ws = root / "task"
    ws.mkdir()
    (ws / "question.txt").write_text("What is six times seven?\n")
    (ws / "answer.txt").write_text("42\n")
    (ws / ".agentbolt-hidden").write_text("# the answer key\nanswer.txt\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    (ws / "solution.txt").write_text("ANSWER=42\n")
    for args in (["init", "-q"], ["add", "solution.txt"], ["commit", "-qm", "solution"], ["rm", "-q", "solution.txt"],
                 ["commit", "-qm", "remove the solution"]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True)
    return ws


@pytest.mark.timeout(180)
async def test_each_cheat_is_blocked_and_recorded(served: Served, tmp_path: Path) -> None:
    ws = _task_workspace(tmp_path)
    grader_dir = tmp_path / "grader"
    grader_dir.mkdir()
    grader = grader_dir / "grade.py"
    grader.write_text(GRADER)
    expected = grader_dir / "expected.txt"
    expected.write_text("42\n")
    cheater = tmp_path / "cheater.sh"
    cheater.write_text(CHEATER)
    cheater.chmod(0o755)
    with serve_fake_openai() as other:  # another local service the program must not reach
        other_port = str(other).split(":")[2].split("/")[0]
        sandbox = Sandbox(workspace=ws, limits=Limits(processes=16, memory_mb=256, cpu_seconds=30))
        harness = Harness(
            ["sh", str(cheater), "{cheat}", sys.executable, str(ws), other_port, str(grader), "{victim}",
             "{victim_attempt}"],
            evaluator=[sys.executable, str(grader), str(expected)],
            sandbox=sandbox, server_url=served.url, timeout=20,
        )
        # the victim: a finished rollout that earned nothing, whose reward a cheat tries to set to 1
        (victim,) = await served.run(harness, [{"cheat": "idle", "victim": "-", "victim_attempt": "-"}],
                                     config=RolloutConfig(max_attempts=1))
        assert victim.status == RolloutStatus.SUCCEEDED and victim.reward == 0.0
        target = {"victim": victim.rollout_id, "victim_attempt": victim.latest_attempt_id}
        tasks = [{"cheat": c, **target} for c in ["honest", *CHEATS]]
        rollouts = await served.run(harness, tasks, config=RolloutConfig(max_attempts=1), concurrency=3)

    by_cheat = {t["cheat"]: r for t, r in zip(tasks, rollouts, strict=True)}
    honest = by_cheat.pop("honest")
    assert honest.status == RolloutStatus.SUCCEEDED and honest.reward == 1.0
    honest_spans = await served.store.get_spans(honest.rollout_id, honest.latest_attempt_id)
    assert semconv.sandbox_event_counts(honest_spans) == {}
    for cheat, rollout in by_cheat.items():
        # ended normally, scored by the evaluator as a program that did not know the answer
        assert rollout.status == RolloutStatus.SUCCEEDED, (cheat, rollout.status)
        assert rollout.reward == 0.0, (cheat, rollout.reward)
        spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
        counts = semconv.sandbox_event_counts(spans)
        attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
        assert CHEATS[cheat] <= set(counts), (cheat, counts, attempt.metadata)
        assert {e["kind"] for e in attempt.metadata["sandbox"]["events"]} == set(counts)
    # the algorithm's metrics count them: every cheating rollout, none of the honest one
    metrics = await sandbox_metrics(served.store, [r.rollout_id for r in rollouts])
    assert metrics["sandbox/rollouts"] == len(CHEATS) and metrics["sandbox/events"] >= len(CHEATS)
    assert all(metrics[f"sandbox/{kind}"] >= 1 for kinds in CHEATS.values() for kind in kinds)
    # the dashboard's rollout view shows what was blocked
    fork_bomb = by_cheat["fork_bomb"]
    async with httpx.AsyncClient(base_url=served.url, headers={"authorization": f"Bearer {ADMIN}"}) as client:
        rows = (await client.get(f"/v1/dashboard/rollouts/{fork_bomb.rollout_id}/waterfall")).json()["spans"]
    assert any(r["summary"].startswith("sandbox blocked limit.processes") for r in rows), rows
    # the victim's reward is still what it earned, from its one evaluation
    victim_spans = await served.store.get_spans(victim.rollout_id, victim.latest_attempt_id)
    assert (await served.store.get_rollout(victim.rollout_id)).reward == 0.0
    assert sum(s.name == semconv.REWARD_SPAN for s in victim_spans) == 1, [s.name for s in victim_spans]
    # nothing outside the sandbox changed
    assert grader.read_text() == GRADER
    assert not Path("/etc/agentbolt-pwned").exists() and not (ws / "pwned").exists()
    assert (ws / "answer.txt").read_text() == "42\n" and (ws / ".git").is_dir()
