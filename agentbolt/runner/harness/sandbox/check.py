"""What the sandbox enforces on this machine, seen from inside one (``agentbolt sandbox check``).

:func:`check_sandbox` builds a real sandbox (the same :class:`SandboxSession` a harness
uses), runs :mod:`probe <agentbolt.runner.harness.sandbox.probe>` in it as an ordinary
program and compares what it saw with what the sandbox promises. Each
:class:`Finding` is one promise: ``guarantee`` findings are what ``docs/harness.md``
says the sandbox guarantees (one that does not hold here fails the check); the others
are the known limits, shown as they stand on this machine.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentbolt.runner.harness.local import LocalExecutor, ProcessSpec
from agentbolt.runner.harness.sandbox.bwrap import bwrap_version, check_bwrap, python_paths
from agentbolt.runner.harness.sandbox.config import Sandbox
from agentbolt.runner.harness.sandbox.seccomp import FILTERED_CALLS
from agentbolt.runner.harness.sandbox.session import SandboxSession

__all__ = ["Finding", "SandboxCheck", "check_sandbox", "findings_from_probe"]

PROBE = Path(__file__).with_name("probe.py")
_NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")
_MAY_WRITE = {"/workspace", "/tmp", "/dev/shm", "/run/agentbolt/out"}
_MINIMAL_DEV = {"console", "core", "fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout",
                "tty", "urandom", "zero"}
_GIVEN_ENV = {"PATH", "LANG", "HOME", "TMPDIR", "NO_PROXY", "no_proxy", "AGENTBOLT_WORKSPACE", "OPENAI_BASE_URL",
              "OPENAI_API_KEY", "PWD", "SHLVL", "_"}


@dataclass(frozen=True)
class Finding:
    area: str
    item: str
    holds: bool
    detail: str
    guarantee: bool = True
    """A promise of the sandbox (False: a known limit, shown as it stands here)."""


@dataclass
class SandboxCheck:
    bwrap: str
    bwrap_version: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every guarantee holds on this machine."""
        return all(f.holds for f in self.findings if f.guarantee)

    def as_dict(self) -> dict[str, Any]:
        return {"bwrap": self.bwrap, "bwrap_version": self.bwrap_version, "ok": self.ok,
                "findings": [asdict(f) for f in self.findings]}


async def check_sandbox(config: Sandbox | None = None) -> SandboxCheck:
    """Run the probe in a sandbox built from ``config`` (default ``Sandbox()``).
    :class:`~agentbolt.runner.harness.sandbox.SandboxUnavailableError` when none can be built."""
    config = config or Sandbox()
    path = check_bwrap(config.bwrap)
    version = ".".join(map(str, bwrap_version(path)))
    with tempfile.TemporaryDirectory(prefix="agentbolt-sandbox-check-") as tmp:
        # the relay needs a server to point at; the probe only connects to the relay
        box = SandboxSession(config, Path(tmp), {}, "http://127.0.0.1:9", "check", "check")
        async with box:
            spec = ProcessSpec(argv=[os.path.realpath(sys.executable), str(PROBE), str(box.inner_port)],
                               env={"OPENAI_BASE_URL": f"{box.program_server_url}/v1", "OPENAI_API_KEY": "probe"},
                               timeout=60)
            result, _ = await box.run(LocalExecutor(), spec, None, None)
    try:
        seen = orjson.loads(result.stdout)
    except orjson.JSONDecodeError:
        raise RuntimeError(f"the sandbox probe printed no report (exit {result.exit_code}): "
                           f"{result.stderr_tail.strip()[-800:]}") from None
    return SandboxCheck(path, version, findings_from_probe(seen, config))


def findings_from_probe(seen: dict[str, Any], config: Sandbox) -> list[Finding]:
    """What ``seen`` (the probe's report) says of each promise, for ``config``."""
    out: list[Finding] = []
    own = {n: os.stat(f"/proc/self/ns/{n}").st_ino for n in _NAMESPACES if os.path.exists(f"/proc/self/ns/{n}")}
    for name, ino in own.items():
        inside = seen["ns"].get(name)
        out.append(Finding("namespaces", name, inside is not None and inside != ino,
                           "its own" if inside != ino else "shared with the controller"))
    out.append(Finding("namespaces", "no further user namespaces", seen["nested_userns"] != "allowed",
                       f"unshare(CLONE_NEWUSER): {seen['nested_userns']} (needs bubblewrap >= 0.8)"))
    status = seen["status"]
    no_caps = all(int(status.get(k, "1"), 16) == 0 for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb"))
    out.append(Finding("privileges", "no capabilities", no_caps,
                       f"effective {status.get('CapEff')}, bounding {status.get('CapBnd')}"))
    out.append(Finding("privileges", "no new privileges (setuid binaries gain nothing)",
                       status.get("NoNewPrivs") == "1", f"NoNewPrivs {status.get('NoNewPrivs')}"))
    out.append(Finding("privileges", f"system-call filter ({', '.join(FILTERED_CALLS)}: EPERM)",
                       status.get("Seccomp") == "2" and seen.get("keyring", "EPERM") != "reachable",
                       f"seccomp mode {status.get('Seccomp')}; session keyring: {seen.get('keyring', 'not probed')}"))
    host_uid = seen["uid_map"][1] if len(seen["uid_map"]) >= 2 else "?"
    out.append(Finding("privileges", "the program is not the host's root", host_uid != "0",
                       f"uid {seen['uid']} inside is uid {host_uid} of the host"
                       + (" (the controller runs as root; without capabilities, on read-only mounts)"
                          if host_uid == "0" else ""), guarantee=False))
    for path, state in seen["writable"].items():
        want = path in _MAY_WRITE
        out.append(Finding("file system", f"{path} {'writable' if want else 'read-only'}",
                           (state == "writable") == want, state))
    for path, state in seen["masked"].items():
        out.append(Finding("file system", f"{path} masked", state not in ("readable", "visible"), state))
    out.append(Finding("file system", "/sys absent", seen["sys"] == "absent", seen["sys"]))
    extra_dev = sorted(set(seen["dev"]) - _MINIMAL_DEV)
    out.append(Finding("file system", "/dev minimal", not extra_dev,
                       ", ".join(seen["dev"]) + (f" (unexpected: {', '.join(extra_dev)})" if extra_dev else "")))
    # a home shows only on the way to a read-only path (this Python under /root/.pyenv, say)
    mounted = [*python_paths(), *config.read_only]
    shown = [f"{top}/{name}" for top, names in seen["home"].items() for name in names]
    stray = [p for p in shown if not any(Path(p) == m or Path(p) in m.parents for m in mounted)]
    out.append(Finding("file system", "no home directories", not stray,
                       ("only on the way to read-only paths: " + ", ".join(shown) if shown else "none")
                       if not stray else "visible: " + ", ".join(stray)))
    out.append(Finding("network", "loopback only", seen["interfaces"] == ["lo"], ", ".join(seen["interfaces"])))
    out.append(Finding("network", "other hosts unreachable", seen["outside"] != "connected",
                       f"192.0.2.1:80: {seen['outside']}"))
    out.append(Finding("network", "the gateway relay listens", seen["gateway"] == "connected",
                       f"127.0.0.1 (the attempt's routes only, checked outside): {seen['gateway']}"))
    leaked = sorted(set(seen["env"]) - _GIVEN_ENV)
    out.append(Finding("environment", "only what the harness gives", not leaked,
                       ", ".join(seen["env"]) + (f" (unexpected: {', '.join(leaked)})" if leaked else "")))
    limits = config.limits
    wanted = {"memory (data)": limits.memory_mb << 20 if limits.memory_mb else None,
              "cpu seconds": limits.cpu_seconds, "file size": limits.file_mb << 20 if limits.file_mb else None,
              "open files": limits.open_files, "core dumps": 0}
    for name, value in wanted.items():
        got = seen["rlimits"][name]
        out.append(Finding("limits", name, value is None or got == value,
                           f"{_limit(got)} (configured {_limit(value)})"))
    root = host_uid == "0"
    out.append(Finding("limits", f"processes: {limits.processes} at once", not root,
                       "counted by the sandbox's init every 50 ms; the kernel's RLIMIT_NPROC "
                       + ("is waived for root: a fast fork loop can pass the count between two samples"
                          if root else "stops forks a little above it"), guarantee=False))
    out.append(Finding("limits", f"threads: {limits.threads} at once", limits.threads is not None,
                       "counted with the processes by the sandbox's init" if limits.threads else "not limited"))
    out.append(Finding("limits", "memory and processes of the whole tree (cgroup)", False,
                       "per-process limits only (see docs/harness.md, 'No cgroup')", guarantee=False))
    out.append(Finding("limits", "gateway requests at once", True,
                       f"{limits.connections} (more are answered 503); head {limits.request_head_s:g} s, "
                       f"body pauses {limits.upload_idle_s:g} s"))
    return out


def _limit(value: int | None) -> str:
    if value is None or value < 0 or value >= 2**62:
        return "unlimited"
    return f"{value >> 20} MiB" if value >= 1 << 20 else str(value)
