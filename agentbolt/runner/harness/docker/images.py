"""Which image a task's program runs in, built where the task gives a Dockerfile, and
checked before anything is claimed: a missing image is one clear error, not N failed
rollouts. Nothing is ever pulled."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentbolt.runner.harness.docker.labels import MANAGED_BY, MANAGER
from agentbolt.runner.harness.errors import HarnessConfigError

__all__ = ["ImageNotReadyError", "ImageSource", "build_context_tag", "check_image", "ensure_image", "image_source"]

REQUIREMENT = "/bin/sh and python3 (3.10 or later) on PATH: agentbolt's init and gateway relay run on them"


class ImageNotReadyError(HarnessConfigError):
    """The image a task needs is not on the Docker Engine (or cannot run agentbolt's init)."""


class ImageSource:
    """An image by name, or a build context (a directory with a Dockerfile) to build it from."""

    def __init__(self, name: str | None, context: Path | None) -> None:
        self.name = name
        self.context = context

    def tag(self) -> str:
        if self.name is not None:
            return self.name
        assert self.context is not None
        return build_context_tag(self.context)


def image_source(task: Any, default: str | None, image_field: str, dockerfile_field: str) -> ImageSource:
    """The task's own image (field ``image_field``) or build context (``dockerfile_field``:
    a directory, or a Dockerfile in one), else ``default``."""
    fields = task if isinstance(task, Mapping) else {}
    named = fields.get(image_field)
    if named:
        return ImageSource(str(named), None)
    context = fields.get(dockerfile_field)
    if context:
        path = Path(str(context)).absolute()
        return ImageSource(None, path.parent if path.is_file() else path)
    if default is None:
        raise HarnessConfigError(
            f"DockerExecutor has no image for this task: give DockerExecutor(image=...), or a task field "
            f"{image_field!r} (an image name) or {dockerfile_field!r} (a directory with a Dockerfile)"
        )
    return ImageSource(default, None)


def build_context_tag(context: Path) -> str:
    """``agentbolt-task:<hash of the context's files>``: the same context builds once."""
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(context)):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            digest.update(str(path.relative_to(context)).encode() + b"\0")
            digest.update(path.read_bytes() if path.is_file() else b"")
    return f"agentbolt-task:{digest.hexdigest()[:16]}"


def ensure_image(client: Any, source: ImageSource) -> str:
    """The image's tag, building it from its context first if need be (never pulling)."""
    import docker

    tag = source.tag()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    if source.context is None:
        raise ImageNotReadyError(
            f"the image {tag!r} is not on this Docker Engine and DockerExecutor never pulls: build or load it first "
            f"(docker build -t {tag} DIR, docker load, or agentbolt.runner.harness.docker.build_host_base_image()), "
            "or give the task a Dockerfile"
        )
    if not (source.context / "Dockerfile").is_file():
        raise ImageNotReadyError(f"the task's build context {source.context} has no Dockerfile")
    try:
        client.images.build(
            path=str(source.context), tag=tag, pull=False, rm=True, forcerm=True, network_mode="none",
            labels={MANAGED_BY: MANAGER},
        )
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)[-2000:]
        raise ImageNotReadyError(f"building {source.context} failed: {exc.msg}\n{log}") from None
    return tag


def check_image(client: Any, tag: str, python: str) -> None:
    """Run ``sh`` and ``python`` once in ``tag``; :class:`ImageNotReadyError` if they do not start."""
    import docker

    try:
        client.containers.run(
            tag, ["/bin/sh", "-c", f'exec {python} -I -S -c "import sys, _socket, _thread, ctypes, resource, select; '
                   'sys.exit(sys.version_info < (3, 10))"'],
            entrypoint=[], network_mode="none", remove=True, user="0:0", labels={MANAGED_BY: MANAGER},
            stdout=True, stderr=True,
        )
    except docker.errors.ContainerError as exc:
        message = exc.stderr.decode("utf-8", "replace").strip() if isinstance(exc.stderr, bytes) else str(exc)
        raise ImageNotReadyError(f"the image {tag!r} cannot run agentbolt's init: it needs {REQUIREMENT} "
                                 f"({message[-500:]})") from None
    except docker.errors.APIError as exc:
        raise ImageNotReadyError(f"the image {tag!r} cannot start: {exc}; it needs {REQUIREMENT}") from None
