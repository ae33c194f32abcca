"""LocalExecutor: runs a program, keeps its output and stderr tail, and kills its whole
process group on timeout or cancellation."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agentbolt.runner.harness.local import OUTPUT_FILE_LIMIT, LocalExecutor, ProcessSpec, ProgramStartError
from runner.harness.helpers import PY, script


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def _wait_for_file(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.02)
    return path.read_text()


async def test_exit_code_stdout_and_stderr_tail(tmp_path: Path) -> None:
    prog = script(tmp_path, "p.py", """
        import sys
        data = sys.stdin.read()
        print("got", data)
        sys.stderr.write("x" * 5000 + "THE END")
        sys.exit(3)
    """)
    result = await LocalExecutor().run(
        ProcessSpec([PY, prog], env=dict(os.environ), stdin=b"hello", stderr_tail_bytes=100)
    )
    assert result.exit_code == 3
    assert result.stdout == b"got hello\n"
    assert result.stderr_tail.endswith("THE END") and len(result.stderr_tail) == 100
    assert not result.timed_out


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    prog = script(tmp_path, "p.py", f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """)
    started = time.monotonic()
    result = await LocalExecutor().run(ProcessSpec([PY, prog], env=dict(os.environ), timeout=1.0, kill_grace=0.5))
    assert result.timed_out
    assert time.monotonic() - started < 10
    grandchild = int(pidfile.read_text())
    await asyncio.sleep(0.1)
    assert not _alive(grandchild), "the program's child survived the timeout"


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    prog = script(tmp_path, "p.py", f"""
        import os, time
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    task = asyncio.ensure_future(LocalExecutor().run(ProcessSpec([PY, prog], env=dict(os.environ), kill_grace=0.5)))
    pid = int(await _wait_for_file(pidfile))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not _alive(pid)


async def test_a_missing_program_is_a_start_error(tmp_path: Path) -> None:
    with pytest.raises(ProgramStartError, match="could not start"):
        await LocalExecutor().run(ProcessSpec([str(tmp_path / "no-such-program")], env={}))


async def test_outputs_are_read_back_without_following_blocking_or_no_end(tmp_path: Path) -> None:
    """What the program leaves at an output's name is read like every file a program left
    (``untrusted.read_left``): a link is not followed, a FIFO never opened, a file past
    ``OUTPUT_FILE_LIMIT`` not read; each is named in ``unread`` with what it is."""
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret")
    prog = script(tmp_path, "p.py", f"""
        import os
        open("plain", "w").write("0.5")
        os.symlink({str(secret)!r}, "link")
        os.mkfifo("fifo")
        open("huge", "w").write("1" * ({OUTPUT_FILE_LIMIT} + 1))
    """)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    spec = ProcessSpec([PY, prog], env=dict(os.environ), workspace=workspace,
                       outputs=("plain", "link", "fifo", "huge", "missing", str(workspace / "plain")))
    result = await asyncio.wait_for(LocalExecutor().run(spec), timeout=30)
    assert result.exit_code == 0
    assert result.outputs == {"plain": b"0.5", str(workspace / "plain"): b"0.5"}
    assert set(result.unread) == {"link", "fifo", "huge"}
    assert "symbolic link" in result.unread["link"] and "FIFO" in result.unread["fifo"]
    assert "bytes" in result.unread["huge"]
    assert not any("host-secret" in why for why in result.unread.values())
