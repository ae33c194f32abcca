"""One rollout's sandbox: the workspace copy, the gateway relay, the run, its events.

::

    async with SandboxSession(config, tmp, task, server_url, rollout_id, attempt_id) as box:
        env = {... "OPENAI_BASE_URL": rollout_base_url(box.program_server_url, ...) ...}
        result, events = await box.run(executor, spec, evaluator_argv)
        # box.workspace: what the program left, for the evaluator (outside the sandbox)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote, urlsplit

import orjson

from agentbolt.runner.harness.local import (
    Executor,
    ProcessResult,
    ProcessSpec,
    ProgramStartError,
)
from agentbolt.runner.harness.sandbox.bwrap import (
    HOME_AT,
    INNER_AT,
    RUN_AT,
    WORKSPACE_AT,
    View,
    bwrap_argv,
    check_bwrap,
    python_paths,
)
from agentbolt.runner.harness.sandbox.config import Sandbox
from agentbolt.runner.harness.sandbox.events import (
    SandboxEvent,
    events_from_output,
    events_from_report,
    merge,
)
from agentbolt.runner.harness.sandbox.proxy import GatewayProxy
from agentbolt.runner.harness.sandbox.seccomp import filter_fd
from agentbolt.runner.harness.sandbox.seccomp import supported as seccomp_supported
from agentbolt.runner.harness.sandbox.workspace import copy_workspace, task_workspace, write_files
from agentbolt.runner.harness.untrusted import Defused, defuse_tree

__all__ = ["SandboxSession"]

_DROPPED_ENV = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "PYTHONPATH")
_SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_PATH_MAX = 4096
_NAME_MAX = 255
"""Linux's limits on a path and on one of its names, in bytes (bubblewrap is Linux-only)."""
_BACKSTOP_S = 15.0
"""Seconds past the program's wall time before the controller kills the sandbox itself."""


class SandboxSession:
    """See the module docstring. ``task`` may name its workspace and hidden paths."""

    def __init__(
        self, config: Sandbox, tmp: Path, task: Any, server_url: str, rollout_id: str, attempt_id: str
    ) -> None:
        self.config = config
        self.tmp = tmp
        self.server_url = server_url.rstrip("/")
        self.rollout_id = rollout_id
        self.attempt_id = attempt_id
        self.source, self.hidden = task_workspace(config, task)
        self.workspace = tmp / "workspace"
        self.run_dir = tmp / "run"
        self.denied: list[SandboxEvent] = []
        self.left_out: list[str] = []
        self.startup_s = 0.0
        parts = urlsplit(self.server_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        self.inner_port = port if port >= 1024 else 18080
        self.program_server_url = f"http://127.0.0.1:{self.inner_port}{parts.path}"
        """The server URL as the program must write it (the relay inside the sandbox)."""
        self._proxy: GatewayProxy | None = None
        self.home: Path | None = None
        """The program's prepared home on the host (:meth:`prepare_home`), else None (``HOME=/tmp``)."""

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        self.bwrap = await asyncio.to_thread(check_bwrap, self.config.bwrap)
        self.left_out = await asyncio.to_thread(copy_workspace, self.source, self.workspace, self.hidden)
        (self.run_dir / "out").mkdir(parents=True)
        base = urlsplit(self.server_url).path
        rid, aid = quote(self.rollout_id, safe=""), quote(self.attempt_id, safe="")
        self._proxy = GatewayProxy(
            self.run_dir / "gateway.sock",
            self.server_url,
            allowed_prefixes=[f"{base}/rollout/{rid}/attempt/{aid}/"],
            allowed_exact=[f"{base}/v1/rollouts/{rid}/attempts/{aid}/reward"],
            on_denied=self._denied,
            max_connections=self.config.limits.connections,
            head_timeout=self.config.limits.request_head_s,
            upload_idle_s=self.config.limits.upload_idle_s,
            on_limited=self._limited,
        )
        await self._proxy.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._proxy is not None:
            await self._proxy.__aexit__(*exc)

    def _denied(self, method: str, target: str) -> None:
        self.denied.append(SandboxEvent("network.denied", f"{method} {target}"))

    def _limited(self, kind: str) -> None:
        limits = self.config.limits
        detail = {
            "limit.connections": f"gateway requests past {limits.connections} at once were answered 503",
            "limit.request_time": f"a gateway request's head took longer than {limits.request_head_s:g} s (408)",
        }[kind]
        self.denied.append(SandboxEvent(kind, detail))

    # ------------------------------------------------------------------ paths
    @property
    def reward_file(self) -> Path:
        """The reward file on the host (the program writes it at :attr:`program_reward_file`)."""
        return self.run_dir / "out" / "reward"

    program_reward_file = f"{RUN_AT}/out/reward"
    program_workspace = WORKSPACE_AT
    program_home = HOME_AT

    def prepare_home(self, files: Mapping[str, str]) -> str:
        """A writable home for the program with ``files`` (paths relative to it) written
        in, mounted at :attr:`program_home` and made its ``HOME``; that path."""
        self.home = write_files(self.run_dir / "home", files)
        return HOME_AT

    def program_env(self, env: Mapping[str, str], command_dirs: Sequence[Path] = ()) -> dict[str, str]:
        """``env`` as the program gets it inside: no proxies, a home in ``/tmp`` (or the
        prepared one of a harness profile); a
        ``PATH`` (where ``env`` has none: the command's own directory, this Python's,
        the system's) and ``LANG``."""
        inner = {k: v for k, v in env.items() if k not in _DROPPED_ENV}
        if "PATH" not in inner:
            dirs = [*map(str, command_dirs), os.path.dirname(sys.executable), *_SYSTEM_PATH]
            inner["PATH"] = ":".join(dict.fromkeys(dirs))
        inner.setdefault("LANG", "C.UTF-8")
        inner.update(HOME=HOME_AT if self.home is not None else "/tmp", TMPDIR="/tmp",
                     NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
                     AGENTBOLT_WORKSPACE=WORKSPACE_AT)
        return inner

    # ------------------------------------------------------------------ the run
    async def run(
        self, executor: Executor, spec: ProcessSpec, evaluator_argv: Sequence[str] | None, cwd: str | None
    ) -> tuple[ProcessResult, list[SandboxEvent]]:
        """Run ``spec`` (argv, env, timeout) in the sandbox; the result as the program
        ended it, and what the sandbox blocked."""
        argv, own_files = _absolute_argv(spec.argv, cwd)
        pythons = python_paths()  # the init runs on this interpreter; Python programs may too
        evaluator_files = [
            f for f in (_absolute_argv(evaluator_argv, cwd, executable=False)[1] if evaluator_argv else [])
            if f not in own_files and not any(p == f or p in f.parents for p in pythons)
        ]
        read_only = [*pythons, *self.config.read_only, *own_files]
        masked = [*self.config.mask, *evaluator_files, *([self.source] if self.source else [])]
        limits = self.config.limits
        view = View(read_only=read_only, masked=masked, workspace=self.workspace, run_dir=self.run_dir,
                    tmp_bytes=limits.tmp_mb << 20 if limits.tmp_mb else None, home=self.home)
        read_fd, write_fd = os.pipe()
        seccomp = filter_fd() if seccomp_supported() else None
        limit_values = {
            "wall": spec.timeout,
            "memory": limits.memory_mb << 20 if limits.memory_mb else None,
            "processes": limits.processes,
            "threads": limits.threads,
            "cpu": limits.cpu_seconds,
            "file": limits.file_mb << 20 if limits.file_mb else None,
            "nofile": limits.open_files,
            "connections": limits.connections,
        }
        inner_args = [
            str(self.inner_port), f"{RUN_AT}/gateway.sock", str(write_fd),
            ",".join(f"{k}={v}" for k, v in limit_values.items() if v is not None), "--", *argv,
        ]
        python = os.path.realpath(sys.executable)
        wrapped = ProcessSpec(
            argv=bwrap_argv(self.bwrap, view, [python, "-I", "-S", "-B", INNER_AT, *inner_args], seccomp_fd=seccomp),
            env=self.program_env(spec.env, _command_dirs(spec.argv[0])),
            cwd=None,
            timeout=(spec.timeout + _BACKSTOP_S) if spec.timeout is not None else None,
            stdin=spec.stdin,
            stderr_tail_bytes=spec.stderr_tail_bytes,
            kill_grace=spec.kill_grace,
            pass_fds=(write_fd,) if seccomp is None else (write_fd, seccomp),
            output_limit=int(limits.output_mb * 1_000_000),
        )
        started = time.monotonic()
        try:
            result = await executor.run(wrapped)
        finally:
            os.close(write_fd)
            if seccomp is not None:
                os.close(seccomp)
            report = _read_report(read_fd)
        self.startup_s = max(0.0, result.duration - float(report.get("duration_s", result.duration)))
        if "start_error" in report:
            raise ProgramStartError(
                f"could not start {argv[0]!r} in the sandbox: {report['start_error']}; a program outside the system "
                "directories must be visible there: add its directory to Sandbox(read_only=[...])"
            )
        if report.get("started") and "exit_code" not in report:
            # the init ended before the program did: only the program can have done that
            # (or the kernel, for it); its run ends there, judged like any other
            report = {**report, "exit_code": 128 + signal.SIGKILL, "init_lost": True}
        if not report:  # the sandbox itself failed (or was killed from outside)
            if result.timed_out:
                return result, [SandboxEvent("limit.wall_time", f"the sandbox ran past {wrapped.timeout} s and was "
                                                                "killed")]
            raise ProgramStartError(
                f"the sandbox did not start (bubblewrap exited with {result.exit_code}): "
                f"{result.stderr_tail.strip()[-800:]}"
            )
        # the program and all it started have ended: make what it left safe for the evaluator
        defused = await asyncio.to_thread(defuse_tree, self.workspace, seen_at=WORKSPACE_AT)
        events = self._events(report, result, defused)
        result = _as_program_result(result, report, time.monotonic() - started)
        return result, events

    def _events(self, report: dict[str, Any], result: ProcessResult, defused: Defused) -> list[SandboxEvent]:
        events = [*self.denied, *events_from_report(report)]
        if defused.removed_links:
            events.append(SandboxEvent("path.denied", "links leading out of the workspace were removed before the "
                                                      f"evaluation: {', '.join(defused.removed_links[:5])}",
                                       len(defused.removed_links)))
        if defused.removed_special:
            special = ", ".join(defused.removed_special[:5])
            events.append(SandboxEvent("path.denied", "FIFOs, sockets or devices left in the workspace were removed "
                                                      f"before the evaluation: {special}",
                                       len(defused.removed_special)))
        names = [*self.hidden, *self.left_out, *(p.name for p in self.config.mask)]
        events += events_from_output(result.stderr_tail, [n for n in names if len(n) > 2 or n == ".git"])
        limit = int(self.config.limits.output_mb * 1_000_000)
        counted = result.extra.get("stdout_bytes", 0)
        written = int(counted) if isinstance(counted, (int, float, str)) else 0
        if written > limit:
            events.append(SandboxEvent("limit.output", f"the program printed {written} bytes; the first {limit} were "
                                                       "kept"))
        return merge(events)


def _absolute_argv(argv: Sequence[str], cwd: str | None, *, executable: bool = True) -> tuple[list[str], list[Path]]:
    """``argv`` with arguments that name existing files made absolute, and those files
    (with ``executable``, the command too when it is found on PATH)."""
    out: list[str] = []
    files: list[Path] = []
    base = Path(cwd) if cwd else Path.cwd()
    for i, arg in enumerate(argv):
        candidate = Path(arg) if os.path.isabs(arg) else base / arg
        if arg and not arg.startswith("-") and ("/" in arg or i > 0) and _names_a_file(candidate):
            out.append(str(candidate.absolute()))
            files.append(candidate.absolute())
            continue
        if executable and i == 0 and "/" not in arg:
            found = shutil.which(arg)
            if found:
                files.append(Path(found))
        out.append(arg)
    return out, files


def _command_dirs(command: str) -> list[Path]:
    """Where this process finds ``command`` (a bare name): first on the program's PATH."""
    found = shutil.which(command) if "/" not in command else None
    return [Path(found).parent] if found else []


def _names_a_file(candidate: Path) -> bool:
    """Whether ``candidate`` is an existing file or directory. An argument that cannot be
    a path (a task text: longer than ``PATH_MAX``, a run of more than ``NAME_MAX`` bytes
    without ``/``, a NUL) is text, not asked of the file system; a path the system
    refuses to look up (too long, not permitted) names no file the sandbox could mount."""
    raw = os.fsencode(candidate)
    if len(raw) >= _PATH_MAX or b"\0" in raw or any(len(part) > _NAME_MAX for part in raw.split(b"/")):
        return False
    try:
        return candidate.exists()
    except OSError:
        return False


_REPORT_LIMIT = 1 << 20


def _read_report(fd: int) -> dict[str, Any]:
    """The init's report: ``{"started": true}`` once the program runs, then (one line
    later) the full report; what parses of it, bounded."""
    chunks = []
    size = 0
    with contextlib.suppress(OSError):
        os.set_blocking(fd, False)
        while size < _REPORT_LIMIT and (chunk := os.read(fd, 65536)):
            chunks.append(chunk)
            size += len(chunk)
    os.close(fd)
    report: dict[str, Any] = {}
    for line in b"".join(chunks).splitlines():
        with contextlib.suppress(orjson.JSONDecodeError, TypeError, ValueError):
            report.update(dict(orjson.loads(line)))
    return report


def _as_program_result(
    result: ProcessResult, report: dict[str, Any], duration: float
) -> ProcessResult:
    """The program's own outcome: it ended by a signal — a limit the sandbox enforced, one
    it sent itself or its processes, or the end of the sandbox's init it caused — is an
    ordinary exit (``128 + signal``: the evaluator still judges the workspace; without
    one it is the program's failure). No signal from inside the sandbox is
    infrastructure, so none is retried. Running out of wall time is a timeout."""
    code = int(report.get("exit_code", result.exit_code if result.exit_code is not None else -1))
    timed_out = bool(report.get("timed_out")) or result.timed_out
    extra = {**result.extra, "sandbox_report": report}
    if code >= 128 and not timed_out:
        extra["signal"] = code - 128
    return ProcessResult(
        exit_code=code, stdout=result.stdout, stderr_tail=result.stderr_tail, timed_out=timed_out,
        duration=duration, extra=extra,
    )
