"""Which process made a container or a Job, and whether that process is still alive.

Everything an executor makes carries ``host:pid:start-time`` of its process. A runner
starting up removes its owner's objects whose process is gone (same host, and no process
with that pid and start time), and leaves those of live runners and other hosts alone.
"""

from __future__ import annotations

import os
import socket

__all__ = ["controller_id", "is_alive"]


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def controller_id(pid: int | None = None) -> str:
    """``host:pid:start-time`` of this (or ``pid``'s) process."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or '?'}"


def is_alive(controller: str) -> bool:
    """Whether the process ``controller`` names may still run (another host's: assumed so)."""
    host, _, rest = controller.partition(":")
    pid, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return _start_time(int(pid)) == started
