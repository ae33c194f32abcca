"""Launching a test worker on 2 CPU processes with ``torchrun`` (gloo), for the tests of
data parallelism and sharding."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

__all__ = ["torchrun"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(worker: Path, *args: str, timeout: float, env: dict[str, str] | None = None) -> None:
    """Run ``worker`` with ``args`` on 2 ranks; fails the test with the end of its output."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "TOKENIZERS_PARALLELISM": "false",
           **(env or {})}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), str(worker), *args]
    done = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
