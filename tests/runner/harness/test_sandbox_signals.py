"""Signals from inside the sandbox (issue 29, class 5): to its init (pid 1), to every
process, to the program itself. None of them ends the run as infrastructure (retried,
never scored): the init ignores them, and a program ended by a signal is scored by the
evaluator like one that exited (``128 + signal``), or fails as its own fault."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from agentbolt.runner.harness import Harness
from agentbolt.types import RolloutConfig, RolloutStatus
from runner.harness.attacks import run_attacks, stderr_tails
from runner.harness.helpers import Served, script

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

BODY = r'''
def at_init(*sigs):
    for sig in sigs:
        try:
            os.kill(1, sig)
        except OSError:
            pass
        time.sleep(0.05)
if attack == "honest":
    answer()
elif attack == "init_interrupt":        # Python's KeyboardInterrupt in the init
    at_init(signal.SIGINT); at_init(signal.SIGINT)
elif attack == "init_every_signal":
    at_init(*[s for s in range(1, 32) if s not in (signal.SIGKILL, signal.SIGSTOP)])
elif attack == "init_kill_stop":
    at_init(signal.SIGSTOP, signal.SIGKILL)
elif attack == "everyone":              # kill(-1): every process it may signal, itself included
    os.kill(-1, signal.SIGKILL)
elif attack == "self_kill":
    os.kill(os.getpid(), signal.SIGKILL)
elif attack == "self_segv":
    os.kill(os.getpid(), signal.SIGSEGV)
elif attack == "self_abort":
    os.abort()
elif attack == "group_term":
    os.killpg(0, signal.SIGTERM)
elif attack == "child_kills_parent":   # a helper process ends the program
    if os.fork() == 0:
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(0)
    time.sleep(5)
if attack.startswith("init_"):
    time.sleep(0.3)                     # the init survived: the program ends as it likes
    sys.exit(3)
'''

ATTACKS = ["init_interrupt", "init_every_signal", "init_kill_stop", "everyone", "self_kill", "self_segv",
           "self_abort", "group_term", "child_kills_parent"]


@pytest.mark.timeout(120)
async def test_signals_end_the_run_as_the_programs_own_doing(served: Served, tmp_path: Path) -> None:
    by = await run_attacks(served, tmp_path, BODY, ATTACKS)
    tails = await stderr_tails(served, by)
    assert by["honest"].status == RolloutStatus.SUCCEEDED and by["honest"].reward == 1.0, tails
    # scored (0.0: it did not answer), one attempt each: nothing was retried as infrastructure
    outcomes = {a: (by[a].status, by[a].reward, by[a].attempt_count) for a in ATTACKS}
    assert outcomes == dict.fromkeys(ATTACKS, (RolloutStatus.SUCCEEDED, 0.0, 1)), tails
    for attack in ("init_interrupt", "init_every_signal", "init_kill_stop"):  # the init lived on
        attempt = await served.store.get_attempt(by[attack].rollout_id, by[attack].latest_attempt_id)
        assert attempt.metadata["harness"]["harness.exit_code"] == 3, (attack, attempt.metadata)
    attempt = await served.store.get_attempt(by["self_kill"].rollout_id, by["self_kill"].latest_attempt_id)
    assert attempt.metadata["harness"]["harness.exit_code"] == 128 + 9
    assert attempt.metadata["harness"]["harness.signal"] == 9


async def test_without_an_evaluator_a_self_kill_is_the_programs_failure(served: Served, tmp_path: Path) -> None:
    program = script(tmp_path, "suicide.py", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    harness = Harness([sys.executable, program], server_url=served.url, timeout=30)
    (rollout,) = await served.run(harness, [{"q": 1}], config=RolloutConfig(max_attempts=3))
    assert rollout.status == RolloutStatus.FAILED and rollout.attempt_count == 1  # not retried
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert "ProgramFailedError" in str(attempt.error) and "exited with code 137" in str(attempt.error)
