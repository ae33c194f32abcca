"""``DockerExecutor``: each harnessed program in its own container, on the Docker Engine API.

::

    harness = Harness("sh agent.sh {question}", evaluator="python3 grade.py {answer}",
                      executor=DockerExecutor("my-agent:1", limits=ContainerLimits(memory_mb=512)))

Per run: the task's image (``image=``, a task field ``image``, or a Dockerfile the task
names, built once and never pulled); a container with ``--network none`` whose only way
out is the gateway relay (the bubblewrap sandbox's: a unix socket mounted in, served
here by :class:`~agentbolt.runner.harness.sandbox.proxy.GatewayProxy`, which lets the
attempt's own gateway and reward routes through and refuses the rest); cgroup limits
for the whole container; the workspace mounted at ``/workspace`` and handed back; the
evaluator, if asked, in a container made from the program's (``docker commit``) with
the tests copied in only then (:mod:`.evaluator`). Containers are labelled with the
rollout and attempt and removed whatever happens; a runner killed with ``kill -9``
leaves containers that the next executor started on this host removes (:mod:`.reaper`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from agentbolt.runner.harness.docker.cgroup import find_cgroup
from agentbolt.runner.harness.docker.client import docker_client
from agentbolt.runner.harness.docker.config import ContainerLimits
from agentbolt.runner.harness.docker.container import (
    ContainerSettings,
    Slot,
    container_logs,
    create_container,
    give_to_user,
    new_slot,
    safe_name,
)
from agentbolt.runner.harness.docker.evaluator import evaluate_inside
from agentbolt.runner.harness.docker.images import ImageSource, check_image, ensure_image, image_source
from agentbolt.runner.harness.docker.launch import GO, OUT_DIR, launch_script
from agentbolt.runner.harness.docker.pool import WarmPool
from agentbolt.runner.harness.docker.reaper import reap_orphans
from agentbolt.runner.harness.events import SandboxEvent
from agentbolt.runner.harness.isolated import IsolatedExecutor
from agentbolt.runner.harness.local import (
    OUTPUT_FILE_LIMIT,
    ProcessResult,
    ProcessSpec,
    ProgramStartError,
    read_outputs,
)
from agentbolt.runner.harness.routes import loopback_url
from agentbolt.runner.harness.sandbox.events import events_from_output, events_from_report, merge
from agentbolt.runner.harness.sandbox.proxy import GatewayProxy
from agentbolt.runner.harness.untrusted import LeftFileError, read_left

__all__ = ["DockerExecutor"]

log = logging.getLogger("agentbolt.runner.harness.docker")
_BACKSTOP_S = 15.0
"""Seconds past the wall time before the container is killed from here (the init inside
kills the program at the wall time itself)."""
_POLL_S = 0.05


class DockerExecutor(IsolatedExecutor):
    """Run each program in a container of the local Docker Engine (see the module docstring).

    * ``image`` — the image of tasks that name none; a task's field ``image_field``
      names another, ``dockerfile_field`` a build context. The image needs ``/bin/sh``
      and ``python3`` (3.10+) for agentbolt's init (``build_host_base_image()`` makes one
      from this machine's files).
    * ``limits`` — :class:`ContainerLimits`; ``read_only_root`` — mount the image
      read-only (``/workspace``, ``/tmp`` and the reward directory stay writable);
      ``user`` — ``"uid:gid"`` the program runs as (default root, without capabilities).
    * ``warm`` — containers of ``image`` kept started ahead of claims.
    * ``owner`` — the label of everything this executor makes; keep it stable, so a
      restarted runner removes what a killed one left.
    * ``base_url`` — the Docker Engine (default ``$DOCKER_HOST`` or the local socket);
      the engine must share this machine's filesystem (the run directory is mounted).
    """

    evaluates_inside = True

    def __init__(
        self,
        image: str | None = None,
        *,
        limits: ContainerLimits | None = None,
        read_only_root: bool = False,
        user: str | None = None,
        warm: int = 0,
        owner: str = "agentbolt",
        python: str = "python3",
        base_url: str | None = None,
        work_dir: str | os.PathLike[str] | None = None,
        image_field: str = "image",
        dockerfile_field: str = "dockerfile",
        log_max_mb: int = 32,
    ) -> None:
        if warm < 0:
            raise ValueError(f"warm must be 0 or more containers, got {warm}")
        if warm and image is None:
            raise ValueError("a warm pool needs DockerExecutor(image=...): the image its containers start from")
        self.image = image
        self.limits = limits or ContainerLimits()
        self.read_only_root = read_only_root
        self.user = _parse_user(user)
        self.warm = warm
        self.owner = owner
        self.python = python
        self.base_url = base_url
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.gettempdir()) / "agentbolt-docker"
        self.image_field = image_field
        self.dockerfile_field = dockerfile_field
        self.log_max_mb = log_max_mb
        self._state: _State | None = None

    def __repr__(self) -> str:
        return f"DockerExecutor(image={self.image!r}, warm={self.warm})"

    def __getstate__(self) -> dict[str, Any]:  # runner processes start their own client and pool
        state = dict(self.__dict__)
        state["_state"] = None
        return state

    @property
    def settings(self) -> ContainerSettings:
        return ContainerSettings(self.owner, self.limits, self.read_only_root, self.user, self.program_workspace,
                                 self.log_max_mb)

    # ------------------------------------------------------------------ IsolatedExecutor
    def program_server_url(self, server_url: str) -> str:
        return loopback_url(server_url)[1]

    async def prepare(self, task: Any) -> None:
        state = await self._start()
        source = image_source(task, self.image, self.image_field, self.dockerfile_field)
        await state.ready(source)

    def check_ready(self, tasks: Sequence[Any] = ()) -> list[str]:
        """Before claiming: every image the tasks (or ``image=``) need is on the engine and
        can run agentbolt's init, building those with a Dockerfile. Returns the tags;
        raises :class:`ImageNotReadyError` with the fix. Also removes orphans (see :mod:`.reaper`)."""
        client = docker_client(self.base_url)
        reap_orphans(client, self.owner)
        sources = {s.tag(): s for s in (image_source(t, self.image, self.image_field, self.dockerfile_field)
                                        for t in (tasks or [None]))}
        for tag, source in sources.items():
            check_image(client, ensure_image(client, source), self.python)
            log.info("image %s is ready", tag)
        return list(sources)

    async def close(self) -> None:
        """Remove the warm pool's containers (runs also end their own)."""
        if self._state is not None:
            await self._state.pool.close()

    async def run(self, spec: ProcessSpec) -> ProcessResult:
        state = await self._start()
        source = image_source(spec.task, self.image, self.image_field, self.dockerfile_field)
        tag = await state.ready(source)
        rollout_id = spec.gateway.rollout_id if spec.gateway else ""
        attempt_id = spec.gateway.attempt_id if spec.gateway else ""
        started = time.monotonic()
        slot = await state.pool.take(tag) if tag == self.image else None
        if slot is None:
            slot = await asyncio.to_thread(new_slot, self.work_dir, self.settings, spec.workspace)
        elif spec.workspace is not None:
            await asyncio.to_thread(_copy_into, spec.workspace, slot.workspace)
            await asyncio.to_thread(give_to_user, slot, self.user)
        denied: list[SandboxEvent] = []
        proxy = None
        try:
            if spec.gateway is not None:
                routes = spec.gateway
                proxy = GatewayProxy(
                    slot.sock_dir / "gateway.sock", routes.server_url, allowed_prefixes=routes.prefixes,
                    allowed_exact=routes.exact, on_denied=lambda m, t: denied.append(
                        SandboxEvent("network.denied", f"{m} {t}")),
                )
                await proxy.__aenter__()
                os.chmod(slot.sock_dir / "gateway.sock", 0o666)  # the container's user connects
            await asyncio.to_thread(self._write_launch, slot, spec)
            if slot.container is None:
                creating = asyncio.ensure_future(asyncio.to_thread(
                    create_container, state.client, tag, slot, self.settings, "program", rollout_id, attempt_id))
                slot.creating = creating  # a cancellation mid-create must still find the container to remove
                container = await asyncio.shield(creating)
                await asyncio.to_thread(container.start)
            else:
                with contextlib.suppress(Exception):  # names can change, labels cannot: the ids in the name
                    await asyncio.to_thread(slot.container.rename, safe_name("program", attempt_id))
            startup = time.monotonic() - started
            result = await self._supervise(slot, spec, started, denied)
            result.startup_s = startup
            if spec.evaluator is not None and not result.timed_out:
                result.evaluator = await evaluate_inside(state.client, slot, spec, result, limits=self.limits,
                                                         workspace=self.program_workspace)
            return result
        finally:
            await asyncio.shield(self._cleanup(slot, proxy, spec.workspace))

    # ------------------------------------------------------------------ the run
    def _write_launch(self, slot: Slot, spec: ProcessSpec) -> None:
        port = loopback_url(spec.gateway.server_url)[0] if spec.gateway else 9
        for name, data in spec.files.items():
            target = slot.workspace / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        limits = {
            "wall": spec.timeout,
            "cpu": self.limits.cpu_seconds,
            "file": self.limits.file_mb << 20 if self.limits.file_mb else None,
            "nofile": self.limits.open_files,
        }
        if spec.stdin is not None:
            (slot.in_dir / "stdin").write_bytes(spec.stdin)
        script = launch_script(
            spec.argv, spec.env, python=self.python, port=port, limits=limits, user=self.user,
            workdir=self.program_workspace, stdin=spec.stdin is not None,
        )
        staged = slot.in_dir / "go.tmp"
        staged.write_text(script)
        os.chmod(staged, 0o600)
        staged.rename(slot.in_dir / Path(GO).name)  # atomic: a warm container sees all of it or nothing

    async def _supervise(self, slot: Slot, spec: ProcessSpec, started: float,
                         denied: list[SandboxEvent]) -> ProcessResult:
        container = slot.container
        cgroup = find_cgroup(container.id)
        events: list[SandboxEvent] = []
        waiter = asyncio.ensure_future(asyncio.to_thread(container.wait))
        deadline = started + spec.timeout + _BACKSTOP_S if spec.timeout is not None else None
        timed_out = limited = False
        try:
            while not waiter.done():
                await asyncio.wait({waiter}, timeout=_POLL_S)
                if waiter.done() or limited:
                    continue
                if cgroup.oom_kills():
                    events.append(SandboxEvent("limit.memory", f"the container reached its {self.limits.memory_mb} "
                                                               "MiB; the whole container was killed"))
                elif cgroup.pid_refusals():
                    events.append(SandboxEvent("limit.processes", f"the container reached {self.limits.processes} "
                                                                  "processes; the whole container was killed"))
                elif deadline is not None and time.monotonic() > deadline:
                    events.append(SandboxEvent("limit.wall_time", f"the container ran past {spec.timeout} s; it was "
                                                                  "killed"))
                    timed_out = True
                else:
                    continue
                limited = True
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(container.kill)
            status = waiter.result()
        except BaseException:
            waiter.cancel()
            raise
        state = (await asyncio.to_thread(_inspect, container)).get("State", {})
        if state.get("OOMKilled") and not any(e.kind == "limit.memory" for e in events):
            events.append(SandboxEvent("limit.memory", f"the container reached its {self.limits.memory_mb} MiB; the "
                                                       "whole container was killed"))
        stdout, total, stderr = await asyncio.to_thread(container_logs, container, spec.output_limit,
                                                        spec.stderr_tail_bytes)
        report = _read_report(slot.report_dir / "report")
        if "start_error" in report:
            raise ProgramStartError(f"could not start {spec.argv[0]!r} in the container ({slot.image}): "
                                    f"{report['start_error']}")
        if not report and not events:
            raise ProgramStartError(f"the container ({slot.image}) did not start agentbolt's init (exit "
                                    f"{status.get('StatusCode')}): {stderr.decode('utf-8', 'replace')[-800:]}; the "
                                    "image needs /bin/sh and python3")
        events = [*denied, *events, *events_from_report(report)]
        events += events_from_output(stderr.decode("utf-8", "replace"), [".git"])
        if total > spec.output_limit:
            events.append(SandboxEvent("limit.output", f"the program printed {total} bytes; the first "
                                                       f"{spec.output_limit} were kept"))
        events = merge(events)
        code = int(report.get("exit_code", status.get("StatusCode", -1)))
        timed_out = timed_out or bool(report.get("timed_out"))
        enforced = any(e.kind.startswith("limit.") and e.kind != "limit.wall_time" for e in events)
        if code >= 128 and not enforced and not timed_out:
            code = -(code - 128)  # a signal the program did not get from a limit
        outputs, unread = await asyncio.to_thread(read_outputs, spec.outputs, lambda name: self._output(slot, name))
        return ProcessResult(
            exit_code=code, stdout=stdout, stderr_tail=stderr.decode("utf-8", "replace"), timed_out=timed_out,
            duration=time.monotonic() - started, extra={"stdout_bytes": total, "sandbox_report": report,
                                                        "container": container.name},
            outputs=outputs, unread=unread, events=events,
            workspace=spec.workspace,  # the run directory goes with the container
        )

    def _output(self, slot: Slot, name: str) -> bytes | None:
        """One of the spec's ``outputs``: a file the program left in a bind-mounted
        directory is read from here without following links
        (:func:`~agentbolt.runner.harness.untrusted.read_left`); another comes through the
        Engine API's archive of that one path, bounded the same way."""
        if name.startswith(OUT_DIR + "/"):
            return read_left(slot.out_dir, name[len(OUT_DIR) + 1:], limit=OUTPUT_FILE_LIMIT)
        if name.startswith(self.program_workspace + "/"):
            return read_left(slot.workspace, name[len(self.program_workspace) + 1:], limit=OUTPUT_FILE_LIMIT)
        if not name.startswith("/"):
            return read_left(slot.workspace, name, limit=OUTPUT_FILE_LIMIT)
        return _archive_file(slot.container, name, limit=OUTPUT_FILE_LIMIT)

    # ------------------------------------------------------------------ lifecycle
    async def _cleanup(self, slot: Slot, proxy: GatewayProxy | None, workspace: Path | None) -> None:
        """Remove the container, stop the relay, hand the workspace back, remove the run directory."""
        if slot.creating is not None:
            with contextlib.suppress(Exception):
                await slot.creating
        if slot.container is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(slot.container.remove, force=True, v=True)
        if proxy is not None:
            with contextlib.suppress(Exception):
                await proxy.__aexit__(None, None, None)
        if workspace is not None and slot.workspace != workspace:  # a warm slot's own workspace
            await asyncio.to_thread(_copy_back, slot.workspace, workspace)
        await asyncio.to_thread(slot.remove_files)

    async def _start(self) -> _State:
        if self._state is None or self._state.pid != os.getpid():
            client = await asyncio.to_thread(docker_client, self.base_url)
            await asyncio.to_thread(reap_orphans, client, self.owner)
            self._state = _State(self, client)
        return self._state


class _State:
    """One process's client, ready images and warm pool."""

    def __init__(self, executor: DockerExecutor, client: Any) -> None:
        self.pid = os.getpid()
        self.client = client
        self.executor = executor
        self.images: dict[str, str] = {}
        self.lock = asyncio.Lock()
        self.pool = WarmPool(
            executor.warm, lambda: new_slot(executor.work_dir, executor.settings, None),
            lambda tag, slot: _start_warm(client, tag, slot, executor.settings),
        )

    async def ready(self, source: ImageSource) -> str:
        key = source.tag()
        if key not in self.images:
            async with self.lock:
                if key not in self.images:
                    tag = await asyncio.to_thread(ensure_image, self.client, source)
                    await asyncio.to_thread(check_image, self.client, tag, self.executor.python)
                    self.images[key] = tag
                    if tag == self.executor.image:
                        self.pool.fill_in_background(tag)
        return self.images[key]


def _start_warm(client: Any, tag: str, slot: Slot, settings: ContainerSettings) -> None:
    create_container(client, tag, slot, settings, "warm")
    slot.container.start()
    slot.warm = True


def _parse_user(user: str | None) -> tuple[int, int] | None:
    if user is None:
        return None
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise ValueError(f"user must be numeric 'uid:gid' (e.g. '65534:65534'), got {user!r}")
    return int(uid), int(gid or uid)


def _inspect(container: Any) -> dict[str, Any]:
    container.reload()
    return dict(container.attrs)


def _read_report(path: Path) -> dict[str, Any]:
    """The init's report: ``{"started": true}`` once the program runs, then (one line
    later) the full report; what parses of it, bounded (as the bubblewrap sandbox reads it)."""
    try:
        with path.open("rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return {}
    report: dict[str, Any] = {}
    for line in data.splitlines():
        with contextlib.suppress(orjson.JSONDecodeError, TypeError, ValueError):
            report.update(dict(orjson.loads(line)))
    if report.get("started") and "exit_code" not in report:
        # the init ended before the program did: only the program can have done that
        report["exit_code"] = 128 + 9
    return report


def _archive_file(container: Any, path: str, *, limit: int) -> bytes | None:
    """The regular file at ``path`` inside the container, or ``None`` when there is none
    there; a link, a directory or anything else is not read (:class:`LeftFileError`), nor
    a file over ``limit`` bytes (the archive is read no further than that)."""
    import docker

    try:
        stream, stat = container.get_archive(path)
    except docker.errors.NotFound:
        return None
    if int(stat.get("size", 0)) > limit:
        raise LeftFileError(f"{path} holds {stat.get('size')} bytes, more than the {limit} read")
    archive = bytearray()
    for chunk in stream:  # a tar of one regular file: its size + headers and padding
        archive += chunk
        if len(archive) > limit + 64 * 1024:
            raise LeftFileError(f"{path} holds more than the {limit} bytes read")
    with tarfile.open(fileobj=io.BytesIO(bytes(archive))) as tar:
        member = tar.next()
        if member is None:
            return None
        if not member.isfile():
            raise LeftFileError(f"{path} is not a regular file; it was not read")
        extracted = tar.extractfile(member)
        return extracted.read() if extracted else None


def _copy_into(source: Path, target: Path) -> None:
    for entry in source.iterdir():
        destination = target / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), destination)
        elif entry.is_dir():
            shutil.copytree(entry, destination, symlinks=True)
        else:
            shutil.copy2(entry, destination)


def _copy_back(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True)

