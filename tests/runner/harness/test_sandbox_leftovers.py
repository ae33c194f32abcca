"""Attacks on the host code that reads what a program left (issue 29, class 2): the
evaluator, the reward file and the output file. Each attack is a rollout beside an
honest control; the host is checked afterwards."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from agentbolt import semconv
from agentbolt.runner.harness import Harness, Sandbox
from agentbolt.types import RolloutConfig, RolloutStatus
from runner.harness.helpers import Served, script

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

# $1 the attack, $2 the masked answer file (its host path), $3 a host file to damage
PROGRAM = """
import os, sys
attack, answer, victim = sys.argv[1:4]
ws = os.environ.get("AGENTBOLT_WORKSPACE", ".")
reward = os.environ["AGENTBOLT_REWARD_FILE"]
if attack == "honest":
    open(os.path.join(ws, "result.txt"), "w").write("42\\n")
elif attack == "link_answer":            # the evaluator, outside, follows it to the real answer
    os.symlink(answer, os.path.join(ws, "result.txt"))
elif attack == "link_answer_dir":        # the same through a linked directory
    os.symlink(os.path.dirname(answer), os.path.join(ws, "key"))
    os.symlink("key/" + os.path.basename(answer), os.path.join(ws, "result.txt"))
elif attack == "link_answer_climb":      # a relative link that climbs out of the workspace copy
    rel = os.path.relpath(answer, os.path.realpath(ws))
    os.symlink(rel, os.path.join(ws, "result.txt"))
elif attack == "link_victim":            # the evaluator writes its log here: the host file would be overwritten
    open(os.path.join(ws, "result.txt"), "w").write("7\\n")
    os.symlink(victim, os.path.join(ws, "grade.log"))
elif attack == "fifo_result":            # the evaluator would block on it
    os.mkfifo(os.path.join(ws, "result.txt"))
"""

GRADER = """
import os, pathlib, sys
ws = pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"])
expected = pathlib.Path(sys.argv[1]).read_text().strip()
got = ws / "result.txt"
ok = got.is_file() and got.read_text().strip() == expected
(ws / "grade.log").write_text(f"graded: {ok}\\n")   # an evaluator that leaves a note in the workspace
print(1.0 if ok else 0.0)
"""

ATTACKS = ["link_answer", "link_answer_dir", "link_answer_climb", "link_victim", "fifo_result"]


@pytest.mark.timeout(120)
async def test_the_evaluator_sees_no_link_out_of_the_workspace(served: Served, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    answer = keys / "expected.txt"
    answer.write_text("42\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    program = script(tmp_path, "program.py", PROGRAM)
    grader = script(tmp_path, "grade.py", GRADER)
    harness = Harness(
        [sys.executable, program, "{attack}", str(answer), str(victim)],
        evaluator=[sys.executable, grader, str(answer)],
        sandbox=Sandbox(mask=[keys]), server_url=served.url, timeout=30, evaluator_timeout=10,
    )
    tasks = [{"attack": a} for a in ["honest", *ATTACKS]]
    rollouts = await served.run(harness, tasks, config=RolloutConfig(max_attempts=1), concurrency=3)
    by = {t["attack"]: r for t, r in zip(tasks, rollouts, strict=True)}
    assert by["honest"].status == RolloutStatus.SUCCEEDED and by["honest"].reward == 1.0
    for attack in ATTACKS:
        rollout = by[attack]
        assert rollout.status == RolloutStatus.SUCCEEDED, (attack, rollout.status)
        assert rollout.reward == 0.0, attack
        spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
        assert "path.denied" in semconv.sandbox_event_counts(spans), attack
    assert victim.read_text() == "precious\n" and answer.read_text() == "42\n"


# the unsandboxed program knows where its reward file lies; it plants what it likes there
SELF_REPORTING = """
import os, sys
attack, secret = sys.argv[1:3]
reward = os.environ["AGENTBOLT_REWARD_FILE"]
if attack == "honest":
    open(reward, "w").write("0.25")
elif attack == "link_secret":     # the parse error would quote the host file into the attempt's error
    os.symlink(secret, reward)
elif attack == "fifo":            # reading it would block the runner
    os.mkfifo(reward)
elif attack == "huge":
    with open(reward, "w") as fh:
        fh.write("1" * (1 << 20))
elif attack == "output_link":     # the controller writes the evaluator's output file: planted in advance
    try:                          # (in the sandbox that directory is read-only)
        os.symlink(secret, os.path.join(os.path.dirname(os.path.dirname(reward)), "output"))
    except OSError:
        pass
    open(reward, "w").write("0.25")
"""


@pytest.mark.parametrize("sandboxed", [False, True])
@pytest.mark.timeout(120)
async def test_the_reward_file_is_read_without_following_or_blocking(
    served: Served, tmp_path: Path, sandboxed: bool
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("0.99 host-secret\n")
    program = script(tmp_path, "self_reporting.py", SELF_REPORTING)
    harness = Harness([sys.executable, program, "{attack}", str(secret)], server_url=served.url, timeout=30,
                      sandbox=sandboxed)
    tasks = [{"attack": a} for a in ["honest", "link_secret", "fifo", "huge", "output_link"]]
    rollouts = await served.run(harness, tasks, config=RolloutConfig(max_attempts=1), concurrency=3)
    by = {t["attack"]: r for t, r in zip(tasks, rollouts, strict=True)}
    assert by["honest"].status == RolloutStatus.SUCCEEDED and by["honest"].reward == 0.25
    assert by["output_link"].status == RolloutStatus.SUCCEEDED and by["output_link"].reward == 0.25
    for attack, kind in (("link_secret", "symbolic link"), ("fifo", "FIFO"), ("huge", "bytes")):
        rollout = by[attack]
        assert rollout.status == RolloutStatus.FAILED, attack
        attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
        error = str(attempt.error)
        assert kind in error and "host-secret" not in error, (attack, error)
    assert secret.read_text() == "0.99 host-secret\n"
