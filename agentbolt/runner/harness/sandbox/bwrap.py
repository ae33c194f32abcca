"""The bubblewrap command line of one sandbox, and whether bubblewrap works here at all.

The view: the system directories (:data:`SYSTEM_PATHS`), this Python and the paths the
harness names, read-only; ``/workspace`` writable (the fresh copy); ``/tmp`` an empty
tmpfs of ``Limits.tmp_mb`` (and ``/dev/shm``); ``/dev`` (read-only) and ``/proc`` minimal
and private; ``/run/agentbolt`` the gateway socket
(read-only) and ``out/`` (the reward file). Everything else of the host, its home
directories, other rollouts' workspaces, the store's files, its unix sockets and the
evaluator, is absent. Namespaces: user, pid, network (loopback only), ipc, uts, cgroup;
no capabilities (not even for root); no further user namespaces (bubblewrap >= 0.8).

The kernel's interfaces: ``/proc`` is the sandbox's own, with the host-wide knobs
read-only (``/proc/sys``, ``/proc/sysrq-trigger``, ``/proc/irq``, ``/proc/bus``,
``/proc/fs``: bubblewrap 0.8 covers only some of them, and a root controller's program
is uid 0 there, for which the kernel checks no capability on most of ``/proc/sys``)
and the files that reveal the kernel or the controller masked (:data:`PROC_MASKED`,
as Docker masks them); ``/sys`` is absent; ``/dev`` is bubblewrap's minimal one
(``null``, ``zero``, ``full``, ``random``, ``urandom``, ``tty``, a private ``pts``),
read-only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.sandbox.config import SYSTEM_PATHS

__all__ = [
    "INNER", "PROC_MASKED", "PROC_READ_ONLY", "SYSTEM_SECRETS", "SandboxUnavailableError", "View", "bwrap_argv",
    "bwrap_version", "check_bwrap",
]

PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
"""Parts of ``/proc`` that set host-wide state: mounted read-only inside."""
PROC_MASKED = (
    "kcore", "keys", "key-users", "kallsyms", "kmsg", "timer_list", "timer_stats", "sched_debug", "latency_stats",
    "kpagecount", "kpageflags", "kpagecgroup", "acpi", "asound", "scsi",
)
"""Parts of ``/proc`` that show the kernel's memory, its keys or the host's hardware:
blanked (files) or emptied (directories) inside."""
SYSTEM_SECRETS = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd", "/etc/ssh",
    "/etc/ssl/private", "/etc/sudoers", "/etc/sudoers.d",
)
"""Files of the visible system directories that hold the host's credentials (readable
by uid 0, which a root controller's program is): blanked inside."""

INNER = Path(__file__).with_name("inner.py")
INNER_AT = "/.agentbolt/init.py"
WORKSPACE_AT = "/workspace"
RUN_AT = "/run/agentbolt"
HOME_AT = f"{RUN_AT}/home"


class SandboxUnavailableError(HarnessConfigError):
    """The sandbox cannot be built on this machine; the message says why and what to do."""


@dataclass(frozen=True)
class View:
    """What one sandbox sees: host paths mounted read-only at the same place, host paths
    blanked out, the workspace copy and the run directory."""

    read_only: Sequence[Path]
    masked: Sequence[Path]
    workspace: Path
    run_dir: Path
    tmp_bytes: int | None = None
    """Size of ``/tmp`` and ``/dev/shm`` (tmpfs, in memory); None: the kernel's default."""
    home: Path | None = None
    """A writable home prepared for the program (its config files), at :data:`HOME_AT`."""


def _system_mounts() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def python_paths() -> list[Path]:
    """This interpreter's prefixes and the real file behind ``sys.executable``."""
    found = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent}
    return sorted(p for p in found if p.exists())


def _under_system(path: Path) -> bool:
    real = os.path.realpath(path)
    return any(real == p or real.startswith(p + "/") for p in map(os.path.realpath, SYSTEM_PATHS))


def bwrap_argv(bwrap: str, view: View, inner_argv: Sequence[str], *, seccomp_fd: int | None = None) -> list[str]:
    """``bwrap ... -- inner_argv`` for ``view``; ``seccomp_fd`` the system-call filter
    (:mod:`~agentbolt.runner.harness.sandbox.seccomp`), which the executor must pass."""
    args = [
        # no capabilities, even for root: nothing to remount, unmount or reconfigure inside;
        # the init is pid 1, so every orphan is its to reap, and its end ends them all
        bwrap, *_namespaces(bwrap), "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL",
        "--hostname", "sandbox",
        *_system_mounts(),
        *_proc_mounts(),
        "--dev", "/dev",
        *_sized(view.tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
        *_sized(view.tmp_bytes), "--tmpfs", "/tmp",
    ]
    seen: set[str] = set()
    for path in _dedupe(view.read_only):
        if _under_system(path) or str(path) in seen:
            continue
        seen.add(str(path))
        args += ["--ro-bind", str(path), str(path)]
    args += ["--ro-bind", str(INNER), INNER_AT]
    args += ["--bind", str(view.workspace), WORKSPACE_AT]
    args += ["--ro-bind", str(view.run_dir), RUN_AT, "--bind", str(view.run_dir / "out"), f"{RUN_AT}/out"]
    if view.home is not None:
        args += ["--bind", str(view.home), HOME_AT]
    for path in [*view.masked, *map(Path, SYSTEM_SECRETS)]:
        if not _visible(path, view.read_only):
            continue
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--remount-ro", "/", "--chdir", WORKSPACE_AT, "--", *inner_argv]
    return args


def _namespaces(bwrap: str) -> list[str]:
    """Every namespace; the user namespace even for root (``--unshare-all`` only tries it),
    and none below it where bubblewrap can forbid them (0.8 and later)."""
    args = ["--unshare-all", "--unshare-user"]
    if bwrap_version(bwrap) >= (0, 8):
        args.append("--disable-userns")
    return args


def _proc_mounts() -> list[str]:
    """A private ``/proc`` with the host-wide knobs read-only and the revealing files masked."""
    args = ["--proc", "/proc"]
    for name in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{name}"):
            args += ["--ro-bind", f"/proc/{name}", f"/proc/{name}"]
    for name in PROC_MASKED:
        path = f"/proc/{name}"
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        elif os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    return args


_versions: dict[str, tuple[int, ...]] = {}


def bwrap_version(bwrap: str) -> tuple[int, ...]:
    """bubblewrap's version (``(0, 8, 0)``); ``(0,)`` when it does not say."""
    if bwrap not in _versions:
        try:
            out = subprocess.run([bwrap, "--version"], capture_output=True, timeout=10, check=False).stdout.decode()
            _versions[bwrap] = tuple(int(p) for p in out.split()[-1].split(".") if p.isdigit())
        except (OSError, subprocess.TimeoutExpired, IndexError, ValueError):
            _versions[bwrap] = (0,)
    return _versions[bwrap]


def _sized(size: int | None) -> list[str]:
    return ["--size", str(size)] if size else []


def _dedupe(paths: Iterable[Path]) -> list[Path]:
    """Drop paths inside another listed directory (one bind covers them)."""
    ordered = sorted({Path(os.path.abspath(p)) for p in paths if os.path.exists(p)}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in ordered:
        if not any(path == k or k in path.parents for k in kept if k.is_dir()):
            kept.append(path)
    return kept


def _visible(path: Path, read_only: Sequence[Path]) -> bool:
    return _under_system(path) or any(path == p or p in path.parents for p in read_only)


_checked: dict[str, str | None] = {}


def check_bwrap(bwrap: str) -> str:
    """The path of a working bubblewrap, or :class:`SandboxUnavailableError` with the
    reason and the fix. Tried once per process (a sandbox that runs ``true``)."""
    found = shutil.which(bwrap)
    if found is None:
        raise SandboxUnavailableError(
            f"the harness sandbox needs bubblewrap ({bwrap!r} is not on PATH): install it "
            "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
            "or run the programs unsandboxed with Harness(..., sandbox=False) if you trust them"
        )
    if found not in _checked:
        args = [found, *_namespaces(found), "--die-with-parent", *_system_mounts(), *_proc_mounts(), "--dev", "/dev",
                "--remount-ro", "/", "--", "true"]
        try:
            done = subprocess.run(args, capture_output=True, timeout=30, check=False)
            _checked[found] = None if done.returncode == 0 else done.stderr.decode("utf-8", "replace").strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            _checked[found] = str(exc)
    reason = _checked[found]
    if reason is not None:
        raise SandboxUnavailableError(
            f"the harness sandbox cannot be built here: {found} failed with {reason!r}. Namespaces are probably "
            "not allowed to this user: enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 "
            "and user.max_user_namespaces > 0; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0), "
            "or in a container allow them (e.g. docker run --security-opt seccomp=unconfined --security-opt "
            "apparmor=unconfined); or run the programs unsandboxed with Harness(..., sandbox=False) if you trust them"
        )
    return found
