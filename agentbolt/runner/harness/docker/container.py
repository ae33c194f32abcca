"""One program container: its directories on this machine, its mounts, its life.

A :class:`Slot` is a run directory (``in/``: the launch script and stdin; ``out/``: the
reward file; ``report/``: the init's report, root-only; ``sock/``: the gateway socket;
``workspace/``) and the container that mounts it. Containers are made here with every
restriction the executor applies: ``--network none``, cgroup limits, capabilities
dropped, no new privileges, a tmpfs ``/tmp``, optionally a read-only root; what a
container printed is read back with :func:`container_logs`.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbolt.runner.harness.docker.config import ContainerLimits
from agentbolt.runner.harness.docker.labels import ATTEMPT, KIND, MANAGED_BY, MANAGER, OWNER, ROLLOUT
from agentbolt.runner.harness.docker.launch import (
    IN_DIR,
    INIT_AT,
    OUT_DIR,
    REPORT_DIR,
    SOCK_DIR,
    WAIT,
)
from agentbolt.runner.harness.docker.reaper import CONTROLLER, controller_id
from agentbolt.runner.harness.sandbox.bwrap import INNER

__all__ = ["ContainerSettings", "Slot", "container_logs", "create_container", "new_slot", "safe_name"]

_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")


def safe_name(*parts: str) -> str:
    """A Docker container name made of ``parts`` and a random suffix."""
    body = "-".join(_UNSAFE.sub("_", p)[:40] for p in parts if p)
    return f"agentbolt-{body}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class ContainerSettings:
    """What every program container of one executor gets."""

    owner: str
    limits: ContainerLimits
    read_only_root: bool
    user: tuple[int, int] | None
    workspace_at: str
    log_max_mb: int


@dataclass
class Slot:
    """A run directory and (once made) its container."""

    root: Path
    workspace: Path
    container: Any = None
    image: str = ""
    warm: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    creating: Any = None
    """The container's creation while it is under way (an asyncio future)."""

    @property
    def in_dir(self) -> Path:
        return self.root / "in"

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def sock_dir(self) -> Path:
        return self.root / "sock"

    def remove_files(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def new_slot(base: Path, settings: ContainerSettings, workspace: Path | None) -> Slot:
    """A fresh run directory under ``base``; ``workspace``: mount this one (else an empty one)."""
    base.mkdir(parents=True, exist_ok=True)
    root = Path(os.path.realpath(base)) / secrets.token_hex(8)
    root.mkdir(mode=0o711)
    slot = Slot(root=root, workspace=workspace or root / "workspace")
    slot.workspace.mkdir(exist_ok=True)
    for path, mode in ((slot.in_dir, 0o700), (slot.report_dir, 0o700), (slot.out_dir, 0o755),
                       (slot.sock_dir, 0o755)):
        path.mkdir(mode=mode)
        os.chmod(path, mode)
    give_to_user(slot, settings.user)
    return slot


def give_to_user(slot: Slot, user: tuple[int, int] | None) -> None:
    """The workspace and ``out/`` writable by the container's user (``in/`` and
    ``report/`` stay root's: the program cannot read the launch script or forge the report)."""
    if user is None:
        return
    for path in (slot.out_dir, slot.workspace):
        for root, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), *user)
        os.chown(path, *user)


def create_container(client: Any, image: str, slot: Slot, settings: ContainerSettings, kind: str,
                     rollout_id: str = "", attempt_id: str = "") -> Any:
    """Create (not start) the program container of ``slot``."""
    from docker.types import LogConfig, Mount

    limits = settings.limits
    labels = {MANAGED_BY: MANAGER, OWNER: settings.owner, KIND: kind, CONTROLLER: controller_id()}
    if rollout_id:
        labels[ROLLOUT] = rollout_id
        labels[ATTEMPT] = attempt_id
    mounts = [
        Mount(INIT_AT, str(INNER), type="bind", read_only=True),
        Mount(IN_DIR, str(slot.in_dir), type="bind", read_only=True),
        Mount(OUT_DIR, str(slot.out_dir), type="bind"),
        Mount(REPORT_DIR, str(slot.report_dir), type="bind"),
        Mount(SOCK_DIR, str(slot.sock_dir), type="bind", read_only=True),
        Mount(settings.workspace_at, str(slot.workspace), type="bind"),
    ]
    tmpfs_size = f",size={limits.tmp_mb}m" if limits.tmp_mb else ""
    kwargs: dict[str, Any] = {
        "command": ["/bin/sh", "-c", WAIT],
        "entrypoint": [],
        "user": "0:0",  # the launch script drops to settings.user after opening the report
        "working_dir": settings.workspace_at,
        "network_mode": "none",
        "hostname": "sandbox",
        "ipc_mode": "private",
        "cap_drop": ["ALL"],
        "cap_add": ["SETUID", "SETGID"] if settings.user is not None else [],
        "security_opt": ["no-new-privileges"],
        "read_only": settings.read_only_root,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev{tmpfs_size}", "/dev/shm": f"rw,nosuid,nodev{tmpfs_size}"},
        "mounts": mounts,
        "labels": labels,
        "name": safe_name(kind, attempt_id),
        "environment": {"HOME": "/tmp", "TMPDIR": "/tmp"},
        "log_config": LogConfig(type="json-file", config={"max-size": f"{settings.log_max_mb}m", "max-file": "1"}),
        "detach": True,
    }
    if limits.memory_mb:
        kwargs["mem_limit"] = f"{limits.memory_mb}m"
        kwargs["memswap_limit"] = f"{limits.memory_mb}m"  # no swap: the limit is RAM
    if limits.cpus:
        kwargs["nano_cpus"] = int(limits.cpus * 1e9)
    if limits.processes:
        kwargs["pids_limit"] = limits.processes
    container = client.containers.create(image, **kwargs)
    slot.container, slot.image, slot.labels = container, image, labels
    return container


def container_logs(container: Any, limit: int, tail: int) -> tuple[bytes, int, bytes]:
    """What a container printed: the first ``limit`` bytes of its stdout, how many bytes
    that was in all, and the last ``tail`` bytes of its stderr (none for ``tail=0``)."""
    out = container.logs(stdout=True, stderr=False)
    err = container.logs(stdout=False, stderr=True)
    return out[:limit], len(out), err[-tail:] if tail else b""
