"""What a program sees from inside the sandbox, printed as one JSON object (standard
library only). Run by :mod:`agentbolt.runner.harness.sandbox.check` as an ordinary
sandboxed program, ``python probe.py RELAY_PORT``; never imported by agentbolt."""

import ctypes
import errno
import json
import os
import platform
import resource
import socket
import sys

CLONE_NEWUSER = 0x10000000
KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())
WRITABLE = ("/", "/usr", "/etc", "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/dev", "/workspace",
            "/tmp", "/dev/shm", "/run/agentbolt/out")
MASKED = ("/proc/kcore", "/proc/keys", "/proc/kallsyms", "/proc/kmsg", "/proc/timer_list", "/etc/shadow",
          "/etc/gshadow", "/etc/ssh", "/etc/ssl/private")
RLIMITS = {"memory (data)": resource.RLIMIT_DATA, "cpu seconds": resource.RLIMIT_CPU,
           "file size": resource.RLIMIT_FSIZE, "open files": resource.RLIMIT_NOFILE,
           "processes (per user)": resource.RLIMIT_NPROC, "core dumps": resource.RLIMIT_CORE}


def _err(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def _writable(path: str) -> str:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            name = os.path.join(path, ".agentbolt-probe")
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NONBLOCK, 0o600))
            os.unlink(name)
        elif os.path.exists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # opened, never written
        else:
            return "absent"
        return "writable"
    except OSError as exc:
        return _err(exc)


def _readable(path: str) -> str:
    try:
        if os.path.isdir(path):
            return "visible" if os.listdir(path) else "empty"
        with open(path, "rb", buffering=0) as fh:
            os.set_blocking(fh.fileno(), False)
            return "readable" if fh.read(64) else "empty"
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return _err(exc)


def _status() -> dict:
    found = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
                found[key] = value.strip()
    return found


def _connect(host: str, port: int) -> str:
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except OSError as exc:
        return _err(exc) if exc.errno else "timed out"


def main() -> None:
    port = int(sys.argv[1])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    found: dict = {"uid": os.getuid(), "status": _status()}
    with open("/proc/self/uid_map") as fh:
        found["uid_map"] = fh.read().split()
    found["ns"] = {n: os.stat(f"/proc/self/ns/{n}").st_ino for n in os.listdir("/proc/self/ns")}
    found["nested_userns"] = "allowed" if libc.unshare(CLONE_NEWUSER) == 0 else errno.errorcode.get(ctypes.get_errno())
    if KEYCTL is not None:
        got = libc.syscall(KEYCTL, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
        found["keyring"] = "reachable" if got >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    found["writable"] = {p: _writable(p) for p in WRITABLE}
    found["masked"] = {p: _readable(p) for p in MASKED}
    found["sys"] = _readable("/sys")
    found["dev"] = sorted(os.listdir("/dev"))
    with open("/proc/net/dev") as fh:
        found["interfaces"] = sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])
    found["outside"] = _connect("192.0.2.1", 80)  # TEST-NET-1: no route, no packet leaves
    found["gateway"] = _connect("127.0.0.1", port)
    found["env"] = sorted(os.environ)
    found["rlimits"] = {name: resource.getrlimit(which)[0] for name, which in RLIMITS.items()}
    found["home"] = {p: sorted(os.listdir(p)) for p in ("/root", "/home") if os.path.isdir(p)}
    print(json.dumps(found))


if __name__ == "__main__":
    main()
