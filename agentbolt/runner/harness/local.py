"""Run one program as a local subprocess, and stop all of it when time is up.

The program gets its own session (``start_new_session``), so a timeout or a
cancellation kills its whole process group — a shell script's children included — not
just the top process. This module knows nothing about rollouts: it takes a
:class:`ProcessSpec` and returns a :class:`ProcessResult`.

The spec says what goes in (argv, environment, stdin, the ``workspace`` directory and
``files`` written into it) and what comes out (stdout, the ``outputs`` files read back,
the workspace as the program left it), so an executor that runs the program elsewhere (a
container, a pod: an :class:`~agentbolt.runner.harness.isolated.IsolatedExecutor`) fits
the same :class:`Executor` protocol without a shared filesystem.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentbolt.runner.harness.events import SandboxEvent
from agentbolt.runner.harness.routes import GatewayRoutes
from agentbolt.runner.harness.untrusted import LeftFileError, read_left

__all__ = ["Executor", "LocalExecutor", "ProcessResult", "ProcessSpec", "ProgramStartError"]

_OUTPUT_LIMIT = 1_000_000
OUTPUT_FILE_LIMIT = 1 << 20
"""Bytes read back of each of a spec's ``outputs`` files (a reward file, a report)."""
"""Bytes of stdout kept (the evaluator reads them); the rest is dropped."""


class ProgramStartError(OSError):
    """The program could not be started (missing executable, bad working directory...)."""


@dataclass(frozen=True)
class ProcessSpec:
    """What to run: ``argv`` in ``cwd`` with exactly ``env``, killed after ``timeout`` s."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    timeout: float | None = None
    stdin: bytes | None = None
    stderr_tail_bytes: int = 4000
    kill_grace: float = 2.0
    """Seconds between SIGTERM and SIGKILL to the process group."""
    pass_fds: tuple[int, ...] = ()
    """File descriptors the program inherits (besides stdin, stdout, stderr)."""
    output_limit: int = _OUTPUT_LIMIT
    """Bytes of stdout kept; ``ProcessResult.extra["stdout_bytes"]`` counts them all."""
    # ---- what goes in besides argv, env and stdin
    workspace: Path | None = None
    """A directory on this machine holding the program's working directory: a local
    executor runs in it (unless ``cwd`` says otherwise), an isolating one puts it at its
    own workspace path (and hands it back in :attr:`ProcessResult.workspace`)."""
    files: Mapping[str, bytes] = field(default_factory=dict)
    """Files written into the workspace before the start, by path relative to it."""
    gateway: GatewayRoutes | None = None
    """The only network an isolating executor lets the program reach (the attempt's gateway
    and reward routes); ``None``: none at all. :class:`LocalExecutor` isolates nothing."""
    evaluator: ProcessSpec | None = None
    """A second program an executor with ``evaluates_inside`` runs in the program's own
    environment after the program ended (Harbor's order): with the program's stdout on its
    stdin and in ``$AGENTBOLT_OUTPUT_FILE``, its exit code in ``$AGENTBOLT_EXIT_CODE``."""
    evaluator_files: Mapping[str, Path] = field(default_factory=dict)
    """Host paths (files or directories, e.g. the tests) copied in for the evaluator only,
    after the program ended, by absolute path in the program's world: never visible to it."""
    task: Any = None
    """The rollout's input, for executors that choose where to run from it (a task's own
    image, a Job template); the program itself learns it from ``env``."""
    # ---- what comes out besides stdout and the exit code
    outputs: tuple[str, ...] = ()
    """Files read back after the run (relative to the workspace, or absolute in the
    program's world) into :attr:`ProcessResult.outputs`; missing ones are left out. The
    program chose what lies there: they are read with
    :func:`~agentbolt.runner.harness.untrusted.read_left` (no link followed, nothing but a
    regular file opened, at most :data:`OUTPUT_FILE_LIMIT` bytes); one that cannot be read
    so is named in :attr:`ProcessResult.unread` with the reason."""


@dataclass
class ProcessResult:
    """How the program ended. ``exit_code`` is negative when a signal killed it."""

    exit_code: int | None
    stdout: bytes = b""
    stderr_tail: str = ""
    timed_out: bool = False
    duration: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)
    outputs: dict[str, bytes] = field(default_factory=dict)
    """The spec's ``outputs`` the program wrote, by the name the spec gave."""
    unread: dict[str, str] = field(default_factory=dict)
    """The spec's ``outputs`` that were there but not read, with why (a link, a FIFO, too
    large): what the program left in their place."""
    workspace: Path | None = None
    """The workspace as the program left it, on this machine (copied back if need be)."""
    evaluator: ProcessResult | None = None
    """How the spec's ``evaluator`` ended, where the executor ran it."""
    events: list[SandboxEvent] = field(default_factory=list)
    """What an isolating executor blocked or enforced (network, limits)."""
    startup_s: float | None = None
    """Seconds an isolating executor spent before the program started."""

    @property
    def killed_by_signal(self) -> bool:
        return self.exit_code is not None and self.exit_code < 0


class Executor(Protocol):
    """Where programs run. :meth:`run` must stop the program when cancelled."""

    async def run(self, spec: ProcessSpec) -> ProcessResult: ...


class LocalExecutor:
    """Runs programs as subprocesses of this process (POSIX)."""

    async def run(self, spec: ProcessSpec) -> ProcessResult:
        started = time.monotonic()
        cwd = spec.cwd if spec.cwd is not None or spec.workspace is None else str(spec.workspace)
        if spec.workspace is not None:
            _write_files(spec.workspace, spec.files)
        try:
            proc = await asyncio.create_subprocess_exec(
                *spec.argv,
                stdin=asyncio.subprocess.PIPE if spec.stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=spec.env,
                cwd=cwd,
                start_new_session=True,
                pass_fds=spec.pass_fds,
            )
        except OSError as exc:
            raise ProgramStartError(
                f"could not start {spec.argv[0]!r} (cwd {cwd or os.getcwd()!r}): {exc}"
            ) from exc
        total = [0]
        stdout = asyncio.ensure_future(_read_head(proc.stdout, spec.output_limit, total))
        stderr = asyncio.ensure_future(_read_tail(proc.stderr, spec.stderr_tail_bytes))
        if spec.stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(spec.stdin)
                await proc.stdin.drain()
            proc.stdin.close()
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=spec.timeout)
        except TimeoutError:
            timed_out = True
            await _kill_group(proc, spec.kill_grace)
        except BaseException:  # cancelled (the runner stopped the attempt): leave nothing behind
            await asyncio.shield(_kill_group(proc, spec.kill_grace))
            stdout.cancel()
            stderr.cancel()
            raise
        # children that kept the pipes open must not keep us waiting
        await _kill_group(proc, 0.0, only_leftovers=True)
        out, err = await asyncio.gather(stdout, stderr)
        base = Path(cwd) if cwd else Path.cwd()
        outputs, unread = read_outputs(spec.outputs, lambda name: _read_output(base, name))
        return ProcessResult(
            exit_code=proc.returncode,
            stdout=out,
            stderr_tail=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            duration=time.monotonic() - started,
            extra={"stdout_bytes": total[0]},
            outputs=outputs,
            unread=unread,
            workspace=spec.workspace,
        )


def _write_files(workspace: Path, files: Mapping[str, bytes]) -> None:
    for name, data in files.items():
        target = workspace / name
        if os.path.isabs(name) or ".." in Path(name).parts:
            raise ProgramStartError(f"ProcessSpec.files names {name!r}: give a path relative to the workspace")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def read_outputs(names: Sequence[str], read: Callable[[str], bytes | None]) -> tuple[dict[str, bytes], dict[str, str]]:
    """``outputs`` and ``unread`` of a :class:`ProcessResult`: ``read(name)`` gives a name's
    bytes (``None``: not there) or raises :class:`LeftFileError` (or ``OSError``) saying
    what the program left there instead."""
    outputs: dict[str, bytes] = {}
    unread: dict[str, str] = {}
    for name in names:
        try:
            data = read(name)
        except (LeftFileError, OSError) as exc:
            unread[name] = str(exc)
            continue
        if data is not None:
            outputs[name] = data
    return outputs, unread


def _read_output(base: Path, name: str) -> bytes | None:
    """One output of a local run: relative to ``base`` or absolute, no link followed."""
    path = Path(name) if os.path.isabs(name) else base / name
    return read_left(path.parent, path.name, limit=OUTPUT_FILE_LIMIT)


async def _kill_group(proc: asyncio.subprocess.Process, grace: float, *, only_leftovers: bool = False) -> None:
    """SIGTERM the process group, SIGKILL it after ``grace`` s; reap the leader."""
    pgid = proc.pid  # start_new_session: the leader's pid is the group id
    if only_leftovers:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    if grace > 0:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    await proc.wait()


async def _read_head(stream: asyncio.StreamReader | None, limit: int, total: list[int]) -> bytes:
    if stream is None:
        return b""
    kept = bytearray()
    while chunk := await stream.read(65536):
        total[0] += len(chunk)
        if len(kept) < limit:
            kept += chunk[: limit - len(kept)]
    return bytes(kept)


async def _read_tail(stream: asyncio.StreamReader | None, limit: int) -> bytes:
    if stream is None:
        return b""
    tail = bytearray()
    while chunk := await stream.read(65536):
        tail += chunk
        if len(tail) > limit:
            del tail[: len(tail) - limit]
    return bytes(tail)
