"""How a container starts its program: a shell line that waits for the run's launch
script, and the script itself (the environment, the user, agentbolt's init and argv).

The container's command is :data:`WAIT`: it waits until ``/run/agentbolt/in/go``
exists, then runs it. A cold run writes the script before the container starts; a warm
pool's containers are already running when a claim writes it, so the image's start-up
is paid ahead. The script opens the init's report (fd 3), drops to the configured user
and ``exec``\\ s agentbolt's init (the bubblewrap sandbox's ``inner.py``): pid 1 of the
container, it relays ``127.0.0.1:PORT`` to the gateway socket and supervises the program.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

__all__ = ["GO", "IN_DIR", "INIT_AT", "OUT_DIR", "REPORT", "SOCKET", "STDIN", "WAIT", "launch_script"]

RUN = "/run/agentbolt"
IN_DIR = f"{RUN}/in"
OUT_DIR = f"{RUN}/out"
SOCK_DIR = f"{RUN}/sock"
SOCKET = f"{SOCK_DIR}/gateway.sock"
REPORT_DIR = f"{RUN}/report"
REPORT = f"{REPORT_DIR}/report"
GO = f"{IN_DIR}/go"
STDIN = f"{IN_DIR}/stdin"
INIT_AT = "/.agentbolt/init.py"
WAIT = f"while [ ! -e {GO} ]; do sleep 0.02; done; . {GO}"

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DROP = (
    "import os,sys;g=int(sys.argv[2]);os.setgroups([]);os.setgid(g);os.setuid(int(sys.argv[1]));"
    "os.execv(sys.executable,[sys.executable,'-I','-S',*sys.argv[3:]])"
)


def launch_script(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    python: str,
    port: int,
    limits: Mapping[str, float | int | None],
    user: tuple[int, int] | None,
    workdir: str,
    stdin: bool,
) -> str:
    """The ``go`` script of one run."""
    bad = [k for k in env if not _NAME.match(k)]
    if bad:
        raise ValueError(f"environment variable names a shell cannot export: {bad}")
    lines = ["set -e", f"cd {shlex.quote(workdir)}"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines.append(f"exec 3>{REPORT}")
    init = [python, "-I", "-S"]
    if user is not None:
        init += ["-c", _DROP, str(user[0]), str(user[1])]
    limit_arg = ",".join(f"{k}={v}" for k, v in limits.items() if v is not None)
    init += [INIT_AT, str(port), SOCKET, "3", limit_arg, "--", *argv]
    redirect = f" <{STDIN}" if stdin else " </dev/null"
    lines.append("exec " + shlex.join(init) + redirect)
    return "\n".join(lines) + "\n"
