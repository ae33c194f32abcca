"""What can be wrong with a Harbor task, each saying what to do."""

from __future__ import annotations

__all__ = ["HarborImageError", "HarborRewardError", "HarborTaskError"]


class HarborTaskError(ValueError):
    """A directory that is not a Harbor task (or a task agentbolt cannot run)."""


class HarborImageError(HarborTaskError):
    """The task's environment needs an image this machine does not have and cannot pull."""

    def __init__(self, image: str, task: str) -> None:
        super().__init__(
            f"task {task!r} builds on the image {image!r}, which is not on this machine and no registry is reachable "
            f"from here: build it locally under that name first (e.g. `docker import rootfs.tar {image}` of a "
            "debootstrap or busybox root filesystem), or point the Dockerfile's FROM at an image you have"
        )
        self.image = image


class HarborRewardError(ValueError):
    """The verifier wrote no reward, or one Harbor would not accept."""
