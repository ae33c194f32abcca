"""Real OS processes for fault tests: a server on a SQLite file, and small scripted
clients. Everything binds to 127.0.0.1 and is killed at the end of the test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``run_server`` in a child process, restartable on the same file and port."""

    def __init__(self, db_path: Path, port: int | None = None, deadline_check_interval: float = 0.1) -> None:
        self.db_path = db_path
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.interval = deadline_check_interval
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        code = (
            "import agentbolt.store.base as b; b.Store.deadline_check_interval = %r\n"
            "from agentbolt.server import run_server\n"
            "run_server(store_url=%r, host='127.0.0.1', port=%d, log_level='warning')\n"
        ) % (self.interval, f"sqlite:///{self.db_path}", self.port)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError("server did not come up")

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def spawn_script(name: str, *args: str) -> subprocess.Popen[str]:
    """Start ``tests/faults/<name>.py`` with line-buffered stdout we can read."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, str(HERE / f"{name}.py"), *args],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def read_line_with(proc: subprocess.Popen[str], prefix: str, timeout: float = 30.0) -> str:
    """Read stdout lines until one starts with ``prefix`` (blocking read; the child
    prints promptly)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"process ended before printing {prefix!r}")
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    raise TimeoutError(f"no line starting with {prefix!r}")
