"""The bubblewrap command line of one sandbox, and whether bubblewrap works here at all.

The view: the system directories (:data:`SYSTEM_PATHS`), this Python and the paths the
harness names, read-only; ``/workspace`` writable (the fresh copy); ``/tmp`` an empty
tmpfs of ``Limits.tmp_mb`` (and ``/dev/shm``); ``/dev`` (read-only) and ``/proc`` minimal
and private; ``/run/agentbolt`` the gateway socket
(read-only) and ``out/`` (the reward file). Everything else of the host, its home
directories, other rollouts' workspaces, the store's files, its unix sockets and the
evaluator, is absent. Namespaces: user, pid, network (loopback only), ipc, uts, cgroup;
no capabilities (not even for root).
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

__all__ = ["INNER", "SandboxUnavailableError", "View", "bwrap_argv", "check_bwrap"]

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


def bwrap_argv(bwrap: str, view: View, inner_argv: Sequence[str]) -> list[str]:
    """``bwrap ... -- inner_argv`` for ``view``."""
    args = [
        # no capabilities, even for root: nothing to remount, unmount or reconfigure inside;
        # the init is pid 1, so every orphan is its to reap, and its end ends them all
        bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL",
        "--hostname", "sandbox",
        *_system_mounts(),
        "--proc", "/proc", "--dev", "/dev",
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
    for path in view.masked:
        if not _visible(path, view.read_only):
            continue
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    args += ["--remount-ro", "/", "--chdir", WORKSPACE_AT, "--", *inner_argv]
    return args


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
        args = [found, "--unshare-all", "--die-with-parent", *_system_mounts(), "--proc", "/proc", "--dev", "/dev",
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
