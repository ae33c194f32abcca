"""A container's cgroup counters, read from this machine: has it hit its memory or
process limit? (cgroup v1 and v2, the cgroupfs and systemd drivers.)"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CgroupCounters", "find_cgroup"]

_ROOT = Path("/sys/fs/cgroup")


class CgroupCounters:
    """``oom_kills``: processes the kernel killed for memory; ``pid_refusals``: forks
    refused at the process limit. Both 0 where the files cannot be read."""

    def __init__(self, memory: Path | None, pids: Path | None) -> None:
        self.memory = memory
        self.pids = pids

    @property
    def found(self) -> bool:
        return self.memory is not None or self.pids is not None

    def oom_kills(self) -> int:
        if self.memory is None:
            return 0
        name = "memory.events" if (self.memory / "memory.events").exists() else "memory.oom_control"
        return _field(self.memory / name, "oom_kill")

    def pid_refusals(self) -> int:
        return _field(self.pids / "pids.events", "max") if self.pids is not None else 0


def find_cgroup(container_id: str) -> CgroupCounters:
    """The cgroup directories of a container of the local Docker Engine."""
    unified = [_ROOT / "system.slice" / f"docker-{container_id}.scope", _ROOT / "docker" / container_id]
    for path in unified:
        if (path / "cgroup.controllers").exists():
            return CgroupCounters(path, path)
    memory = _first([_ROOT / "memory" / "docker" / container_id,
                     _ROOT / "memory" / "system.slice" / f"docker-{container_id}.scope"])
    pids = _first([_ROOT / "pids" / "docker" / container_id,
                   _ROOT / "pids" / "system.slice" / f"docker-{container_id}.scope"])
    return CgroupCounters(memory, pids)


def _first(paths: list[Path]) -> Path | None:
    return next((p for p in paths if p.is_dir()), None)


def _field(path: Path, name: str) -> int:
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0
