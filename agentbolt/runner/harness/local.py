"""Run one program as a local subprocess, and stop all of it when time is up.

The program gets its own session (``start_new_session``), so a timeout or a
cancellation kills its whole process group — a shell script's children included — not
just the top process. This module knows nothing about rollouts: it takes a
:class:`ProcessSpec` and returns a :class:`ProcessResult`. Another executor (a
Kubernetes Job, a sandbox) implements the same :class:`Executor` protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Executor", "LocalExecutor", "ProcessResult", "ProcessSpec", "ProgramStartError"]

_OUTPUT_LIMIT = 1_000_000
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


@dataclass
class ProcessResult:
    """How the program ended. ``exit_code`` is negative when a signal killed it."""

    exit_code: int | None
    stdout: bytes = b""
    stderr_tail: str = ""
    timed_out: bool = False
    duration: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)

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
        try:
            proc = await asyncio.create_subprocess_exec(
                *spec.argv,
                stdin=asyncio.subprocess.PIPE if spec.stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=spec.env,
                cwd=spec.cwd,
                start_new_session=True,
                pass_fds=spec.pass_fds,
            )
        except OSError as exc:
            raise ProgramStartError(
                f"could not start {spec.argv[0]!r} (cwd {spec.cwd or os.getcwd()!r}): {exc}"
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
        return ProcessResult(
            exit_code=proc.returncode,
            stdout=out,
            stderr_tail=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            duration=time.monotonic() - started,
            extra={"stdout_bytes": total[0]},
        )


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
