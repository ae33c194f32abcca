"""Remove what a killed runner left in Docker: containers (and snapshots) it labelled,
whose controller process is gone.

Every container carries ``agentbolt.controller = host:pid:start-time`` of the process
that made it. A reaper (run when an executor first starts in a process) removes the
owner's containers made on this host by a process that no longer exists (or whose pid
now belongs to another process), and leaves those of live runners and other hosts alone.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from agentbolt.runner.harness.docker.labels import owned
from agentbolt.runner.harness.owner import controller_id, is_alive

__all__ = ["CONTROLLER", "controller_id", "reap_orphans"]

log = logging.getLogger("agentbolt.runner.harness.docker")
CONTROLLER = "agentbolt.controller"


def reap_orphans(client: Any, owner: str) -> list[str]:
    """Remove ``owner``'s orphaned containers and snapshot images; their names."""
    import docker

    removed: list[str] = []
    # the low-level list: one request, no inspect per container (one removed meanwhile is no error)
    for container in client.api.containers(all=True, filters=owned(owner)):
        if is_alive((container.get("Labels") or {}).get(CONTROLLER, "")):
            continue
        run_dir = _run_dir(container)
        try:
            client.api.remove_container(container["Id"], force=True, v=True)
            removed.append(str((container.get("Names") or [container["Id"][:12]])[0]).lstrip("/"))
        except docker.errors.NotFound:
            continue
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
    for image in client.images.list(filters=owned(owner)):
        if not is_alive(image.labels.get(CONTROLLER, "")):
            try:
                client.images.remove(image.id, force=True)
                removed.append(image.short_id)
            except docker.errors.APIError:
                continue
    if removed:
        log.warning("removed %d container(s)/snapshot(s) left by a runner that is gone: %s", len(removed),
                    ", ".join(removed))
    return removed


def _run_dir(container: dict[str, Any]) -> Path | None:
    """The run directory on this machine that the container mounts (``in/`` is in it);
    ``container`` as the Engine API's container list gives it."""
    for mount in container.get("Mounts") or []:
        if mount.get("Destination") == "/run/agentbolt/in":
            root = Path(str(mount.get("Source", ""))).parent
            if all((root / d).is_dir() for d in ("in", "out", "report", "sock")):  # only ever our own layout
                return root
    return None
