"""Multi-process strategy acceptance: a real training script (``scripts/fit_multiprocess.py``)
run as its own OS process, starting a server on SQLite and runner processes.

* 4 runners, 200 rollouts, one runner SIGKILLed mid-run → all 200 succeed (the killed
  runner's rollouts are retried), ``fit`` returns, the script exits 0, nothing is left.
* Ctrl-C (or SIGTERM) on the script → it stops its children (none left behind) and no
  attempt is left running in the store: they were handed back for retry.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.trainer import Trainer
from agentbolt.types import AttemptStatus, RolloutStatus

SCRIPT = Path(__file__).parent / "scripts" / "fit_multiprocess.py"

pytestmark = pytest.mark.slow


def start_script(run_dir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(run_dir), *args],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


def read_tagged(proc: subprocess.Popen[str], tag: str, timeout: float = 60.0) -> Any:
    """The JSON after ``TAG `` on the first stdout line that has it."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the script ended (code {proc.wait()}) before printing {tag}")
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1 :])
    raise AssertionError(f"no {tag} line within {timeout} s")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


async def stored_state(db: Path) -> tuple[list[Any], list[Any], list[int]]:
    """Rollouts, their attempts and every runner pid recorded in the run's store."""
    store = SqliteStore(db)
    await store.start()
    try:
        rollouts = (await store.query_rollouts(limit=1000)).items
        attempts = [a for r in rollouts for a in await store.query_attempts(r.rollout_id)]
        pids = [w.metadata["pid"] for w in await store.query_workers() if "pid" in w.metadata]
        return rollouts, attempts, pids
    finally:
        await store.close()


def test_killed_runner_process_is_retried_and_fit_returns(tmp_path: Path) -> None:
    proc = start_script(tmp_path, "--rollouts", "200", "--runners", "4", "--kill-one")
    try:
        pids = read_tagged(proc, "PIDS")
        assert len(pids["runners"]) == 4
        result = read_tagged(proc, "RESULT")
        assert proc.wait(timeout=60) == 0  # the training script exits normally
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert result["killed"] is not None and result["killed"]["pid"] in pids["runners"]
    assert result["succeeded"] == 200 and result["statuses"] == ["succeeded"]
    assert result["retried"] >= 1  # the killed runner's rollouts ran again elsewhere

    rollouts, attempts, runner_pids = asyncio.run(stored_state(tmp_path / "store.db"))
    assert len(rollouts) == 200 and all(r.status == RolloutStatus.SUCCEEDED for r in rollouts)
    crashed = [a for a in attempts if a.error is not None and a.error.type == "RunnerCrashed"]
    assert crashed and all(a.worker_id == result["killed"]["worker"] for a in crashed)
    assert len(runner_pids) == 5  # four runners, plus the one started in place of the killed one
    assert wait_gone(runner_pids + [pids["server"]]) == []  # no orphans


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_interrupt_stops_children_and_hands_running_attempts_back(tmp_path: Path, signum: int, code: int) -> None:
    proc = start_script(tmp_path, "--rollouts", "12", "--runners", "2", "--slow")
    try:
        pids = read_tagged(proc, "PIDS")
        time.sleep(1.0)  # let the runners claim and start their (30 s) rollouts
        proc.send_signal(signum)
        out, _ = proc.communicate(timeout=45)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert proc.returncode == code
    if signum == signal.SIGINT:
        assert "INTERRUPTED" in out
    assert wait_gone(pids["runners"] + [pids["server"]]) == []
    rollouts, attempts, _ = asyncio.run(stored_state(tmp_path / "store.db"))
    assert not [a for a in attempts if a.status in (AttemptStatus.PREPARING, AttemptStatus.RUNNING)]
    handed_back = [a for a in attempts if a.error is not None and a.error.type == "RunnerShutdown"]
    assert handed_back and all(a.error.retryable for a in handed_back)  # type: ignore[union-attr]
    assert all(r.status in (RolloutStatus.QUEUING, RolloutStatus.REQUEUING) for r in rollouts)


def test_agents_that_cannot_reach_child_processes_are_refused_early(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="top level of a module"):
        Trainer(strategy="multiprocess", run_dir=str(tmp_path)).fit(lambda task: 1.0, [1])
    assert not (tmp_path / "store.db").exists()  # nothing was started


def test_memory_store_cannot_be_shared_with_processes(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="MemoryStore lives inside one process"):
        Trainer(strategy="multiprocess", store=MemoryStore()).fit(f"{__name__}:agent_for_refusal", [1])


def agent_for_refusal(task: Any) -> float:
    return 1.0
