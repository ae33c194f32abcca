"""Real ``agentbolt server`` and ``agentbolt runner`` processes, started through the CLI
exactly as a user would, for the chaos and multi-host tests.

Output goes to log files (never to unread pipes, which would block a chatty child), so a
failing test can print the tail of every process's log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from .procs import free_port

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
CHAOS_AGENT = f"{HERE / 'chaos_agent.py'}:chaos_agent"


class _Process:
    """A child process with its output in ``log`` and a kill -9 that waits for it."""

    name: str
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, argv: Sequence[str], env: dict[str, str] | None = None, prefix: Sequence[str] = ()) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [*prefix, *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})),
            )

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return f"--- {self.name}: no log"
        return f"--- {self.name} ({self.log}):\n" + "\n".join(text[-lines:])


class Server(_Process):
    """``agentbolt server --store URL`` on a fixed port, restartable on the same port."""

    def __init__(
        self,
        store_url: str,
        log_dir: Path,
        *,
        name: str = "server",
        host: str = "127.0.0.1",
        port: int | None = None,
        token: str | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        self.store_url = store_url
        self.name = name
        self.host = host
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        self.token = token
        self.extra = list(extra)
        self.log = log_dir / f"{name}.log"
        self.starts = 0

    def start(self, timeout: float = 60.0) -> float:
        """Start and wait until ``/healthz`` answers; returns the seconds it took."""
        t0 = time.monotonic()
        argv = [sys.executable, "-m", "agentbolt", "server", "--store", self.store_url, "--host", self.host,
                "--port", str(self.port), "--log-level", "warning", *self.extra]
        if self.token:
            argv += ["--admin-token", self.token]
        self._spawn(argv)
        self.starts += 1
        while time.monotonic() - t0 < timeout:
            if not self.alive:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode if self.proc else '?'}\n{self.tail()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} did not come up in {timeout} s\n{self.tail()}")


class Runner(_Process):
    """``agentbolt runner --server URL... --agent tests/faults/chaos_agent.py:chaos_agent``."""

    def __init__(
        self,
        servers: Sequence[str],
        log_dir: Path,
        worker_id: str,
        *,
        concurrency: int = 8,
        token: str | None = None,
        agent: str = CHAOS_AGENT,
        heartbeat_interval: float = 0.5,
        poll_interval: float = 0.05,
        netns: str | None = None,
    ) -> None:
        self.servers = list(servers)
        self.name = worker_id
        self.worker_id = worker_id
        self.log = log_dir / f"{worker_id}.log"
        self.log_dir = log_dir
        self.concurrency = concurrency
        self.token = token
        self.agent = agent
        self.heartbeat_interval = heartbeat_interval
        self.poll_interval = poll_interval
        self.netns = netns

    def start(self) -> None:
        argv = [sys.executable, "-m", "agentbolt", "runner", "--agent", self.agent, "--worker-id", self.worker_id,
                "--concurrency", str(self.concurrency), "--heartbeat-interval", str(self.heartbeat_interval),
                "--poll-interval", str(self.poll_interval), "--log-level", "warning"]
        for url in self.servers:
            argv += ["--server", url]
        if self.token:
            argv += ["--token", self.token]
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        self._spawn(argv, env={"CHAOS_LOG_DIR": str(self.log_dir), "CHAOS_WORKER": self.worker_id}, prefix=prefix)
