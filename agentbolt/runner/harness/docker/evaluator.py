"""The evaluator inside (``evaluate_in="program"``, Harbor's order), for :class:`~.executor.DockerExecutor`.

When the program has ended, its container is committed to a snapshot image; a container
of that snapshot gets the tests copied in (at the paths the spec names, ``/tests``) and
the program's stdout at ``/run/agentbolt/output``, then runs the evaluator there: the
workspace bind-mounted as the program left it, the program's stdout on stdin,
``$AGENTBOLT_EXIT_CODE``, no network, the executor's memory and process limits. The
tests are never in the program's container. The evaluator's container and the snapshot
are removed whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentbolt.runner.harness.docker.config import ContainerLimits
from agentbolt.runner.harness.docker.container import Slot, container_logs, safe_name
from agentbolt.runner.harness.docker.labels import ATTEMPT, KIND
from agentbolt.runner.harness.local import ProcessResult, ProcessSpec, ProgramStartError

__all__ = ["evaluate_inside", "evaluator_dirs"]


async def evaluate_inside(client: Any, slot: Slot, spec: ProcessSpec, program: ProcessResult, *,
                          limits: ContainerLimits, workspace: str) -> ProcessResult:
    """Run ``spec.evaluator`` in a container of a snapshot of ``slot``'s ended program
    container (the module docstring); ``workspace`` is where the workspace is mounted."""
    assert spec.evaluator is not None
    evaluator = spec.evaluator
    labels = {**slot.labels, KIND: "snapshot"}
    committing = asyncio.ensure_future(asyncio.to_thread(
        slot.container.commit, repository="agentbolt-snapshot", tag=slot.container.id[:12],
        conf={"Labels": labels}))
    try:
        snapshot = await asyncio.shield(committing)
    except asyncio.CancelledError:  # the snapshot still appears: remove it, then stop
        with contextlib.suppress(Exception):
            made = await committing
            await asyncio.to_thread(client.images.remove, made.id, force=True)
        raise
    container = None
    try:
        env = {**evaluator.env, "AGENTBOLT_EXIT_CODE": str(program.exit_code),
               "AGENTBOLT_OUTPUT_FILE": "/run/agentbolt/output", "HOME": "/tmp", "TMPDIR": "/tmp"}
        command = "cd " + workspace + " && exec \"$@\" </run/agentbolt/output"
        container = await asyncio.to_thread(_evaluator_container, client, snapshot.id, slot, evaluator, env,
                                            command, {**labels, KIND: "evaluator"}, limits, workspace)
        archive = _tar({"/run/agentbolt/output": program.stdout}, evaluator_dirs(spec.evaluator_files))
        await asyncio.to_thread(container.put_archive, "/", archive)
        started = time.monotonic()
        await asyncio.to_thread(container.start)
        waiter = asyncio.ensure_future(asyncio.to_thread(container.wait))
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout=evaluator.timeout)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.kill)
            await waiter
        status = waiter.result()
        stdout, total, stderr = await asyncio.to_thread(container_logs, container, evaluator.output_limit,
                                                        evaluator.stderr_tail_bytes)
        return ProcessResult(exit_code=int(status.get("StatusCode", -1)), stdout=stdout,
                             stderr_tail=stderr.decode("utf-8", "replace"), timed_out=timed_out,
                             duration=time.monotonic() - started, extra={"stdout_bytes": total})
    finally:
        if container is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.to_thread(container.remove, force=True, v=True))
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.to_thread(client.images.remove, snapshot.id, force=True))


def _evaluator_container(client: Any, image: str, slot: Slot, evaluator: ProcessSpec, env: Mapping[str, str],
                         command: str, labels: dict[str, str], limits: ContainerLimits, workspace: str) -> Any:
    from docker.types import Mount

    kwargs: dict[str, Any] = {
        "command": ["/bin/sh", "-c", command, "sh", *evaluator.argv],
        "entrypoint": [], "user": "0:0", "working_dir": workspace, "network_mode": "none",
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "environment": dict(env),
        "mounts": [Mount(workspace, str(slot.workspace), type="bind")],
        "tmpfs": {"/tmp": "rw,nosuid,nodev"}, "labels": labels, "detach": True,
        "name": safe_name("evaluator", labels.get(ATTEMPT, "")),
    }
    if limits.memory_mb:
        kwargs["mem_limit"] = kwargs["memswap_limit"] = f"{limits.memory_mb}m"
    if limits.processes:
        kwargs["pids_limit"] = limits.processes
    return client.containers.create(image, **kwargs)


def evaluator_dirs(files: Mapping[str, Path]) -> dict[str, Path]:
    """The evaluator's files (tests) by their path inside; each must exist here."""
    missing = [str(p) for p in files.values() if not p.exists()]
    if missing:
        raise ProgramStartError(f"the evaluator's files {missing} do not exist")
    return dict(files)


def _tar(data: Mapping[str, bytes], paths: Mapping[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, content in data.items():
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size, info.mode = len(content), 0o644
            tar.addfile(info, io.BytesIO(content))
        for name, path in paths.items():
            tar.add(str(path), name.lstrip("/"))
    return buffer.getvalue()
