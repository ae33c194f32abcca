"""The images a task's environment starts from, and whether this machine has them.

No registry is reachable from agentbolt's machines, so every base image must already be
local: :func:`require_local_images` names the first one that is not
(:class:`~agentbolt.tasks.harbor.errors.HarborImageError`), before anything is built.
"""

from __future__ import annotations

import re
import subprocess
from typing import Protocol

from agentbolt.tasks.harbor.errors import HarborImageError
from agentbolt.tasks.harbor.task import HarborTask

__all__ = ["DockerImages", "ImageStore", "base_images", "require_local_images"]

_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE | re.MULTILINE)


def base_images(task: HarborTask) -> list[str]:
    """The images the environment needs: ``[environment].docker_image``, or each ``FROM``
    of ``environment/Dockerfile`` that is not an earlier build stage or ``scratch``."""
    if task.config.environment.docker_image:
        return [task.config.environment.docker_image]
    if task.dockerfile is None:
        return []
    stages: set[str] = set()
    images: list[str] = []
    for match in _FROM.finditer(task.dockerfile.read_text()):
        image, alias = match.group(1), match.group(2)
        if image.lower() not in stages and image != "scratch" and image not in images:
            images.append(image)
        if alias:
            stages.add(alias.lower())
    return images


class ImageStore(Protocol):
    """Which images this machine has."""

    def has(self, image: str) -> bool: ...


class DockerImages:
    """The local Docker daemon's images (``docker image inspect``)."""

    def __init__(self, docker: str = "docker") -> None:
        self.docker = docker

    def has(self, image: str) -> bool:
        done = subprocess.run([self.docker, "image", "inspect", image], capture_output=True, check=False, timeout=60)
        return done.returncode == 0


def require_local_images(task: HarborTask, images: ImageStore) -> list[str]:
    """The task's base images, all present in ``images``; else :class:`HarborImageError`
    naming the first missing one."""
    needed = base_images(task)
    for image in needed:
        if not images.has(image):
            raise HarborImageError(image, task.name)
    return needed
