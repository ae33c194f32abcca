"""A small base image made of this machine's own files, for machines with no registry.

``build_host_base_image()`` imports a root filesystem of busybox (``/bin/sh``, awk,
sed...), this machine's ``python3`` with its standard library (agentbolt's init and
relay run on it; Python programs may too) and any other programs named (``curl``), each
with the shared libraries it links. Task images can then ``FROM`` it in their
Dockerfile. Built once per tag; ``docker rmi`` it to rebuild.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentbolt.runner.harness.docker.client import docker_client
from agentbolt.runner.harness.docker.labels import MANAGED_BY, MANAGER
from agentbolt.runner.harness.errors import HarnessConfigError

__all__ = ["HOST_BASE_IMAGE", "build_host_base_image"]

HOST_BASE_IMAGE = "agentbolt-base:host"
_SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "site-packages",
                "dist-packages"}
_LIB = re.compile(r"(/\S+) \(0x")


def build_host_base_image(
    tag: str = HOST_BASE_IMAGE, *, programs: Sequence[str] = ("curl",), client: Any = None, python: str | None = None
) -> str:
    """Import ``tag`` from this machine's busybox, python3 and ``programs`` unless it exists; returns ``tag``."""
    import docker

    client = client or docker_client()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    busybox = shutil.which("busybox")
    if busybox is None:
        raise HarnessConfigError("build_host_base_image needs busybox (apt-get install busybox-static)")
    python = python or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")) or ""
    if not python:
        raise HarnessConfigError("build_host_base_image needs a python3 on PATH")
    python = os.path.realpath(python)
    stdlib = subprocess.run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    found = [shutil.which(p) for p in programs]
    missing = [p for p, f in zip(programs, found, strict=True) if f is None]
    if missing:
        raise HarnessConfigError(f"build_host_base_image: {', '.join(missing)} not found on this machine")
    binaries = [python, *(os.path.realpath(f) for f in found if f)]
    dynload = [str(p) for p in Path(stdlib, "lib-dynload").glob("*.so")]
    with tempfile.TemporaryDirectory(prefix="agentbolt-base-") as tmp:
        archive = Path(tmp) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            _dirs(tar, ["bin", "usr/bin", "etc", "tmp", "workspace", "run", "root", "home", "dev", "proc", "sys"])
            tar.add(busybox, "bin/busybox")
            applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
            for applet in applets:
                if applet != "busybox":
                    _link(tar, f"bin/{applet}", "busybox")
            for binary in binaries:
                tar.add(binary, binary.lstrip("/"))
            if python != "/usr/bin/python3":
                _link(tar, "usr/bin/python3", python)
            for lib in sorted(_libraries([*binaries, *dynload])):
                tar.add(os.path.realpath(lib), lib.lstrip("/"))
            tar.add(stdlib, stdlib.lstrip("/"), filter=_stdlib_filter(stdlib))
            _file(tar, "etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n")
            _file(tar, "etc/group", "root:x:0:\nnogroup:x:65534:\n")
        client.api.import_image(
            src=str(archive), repository=tag.split(":")[0], tag=tag.split(":")[1] if ":" in tag else "latest",
            changes=['CMD ["/bin/sh"]', "WORKDIR /workspace", "ENV PATH=/usr/local/bin:/usr/bin:/bin",
                     f'LABEL {MANAGED_BY}="{MANAGER}"'],
        )
    client.images.get(tag)
    return tag


def _libraries(binaries: Sequence[str]) -> set[str]:
    libs: set[str] = set()
    for binary in binaries:
        done = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            match = _LIB.search(line)
            if match and os.path.exists(match.group(1)):
                libs.add(match.group(1))
    return libs


def _stdlib_filter(stdlib: str) -> Any:
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        relative = Path(info.name).relative_to(stdlib.lstrip("/")).parts
        return None if relative and relative[0] in _SKIP_STDLIB else info

    return keep


def _dirs(tar: tarfile.TarFile, names: Sequence[str]) -> None:
    for name in names:
        info = tarfile.TarInfo(name)
        info.type = tarfile.DIRTYPE
        info.mode = 0o1777 if name == "tmp" else 0o755
        tar.addfile(info)


def _link(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    tar.addfile(info)


def _file(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))
