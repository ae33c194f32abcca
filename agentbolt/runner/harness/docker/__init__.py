"""Harnessed programs in Docker containers: :class:`DockerExecutor` (``pip install 'agentbolt[docker]'``).

See :mod:`agentbolt.runner.harness.docker.executor` and ``docs/harness.md``.
"""

from agentbolt.runner.harness.docker.base import HOST_BASE_IMAGE, build_host_base_image
from agentbolt.runner.harness.docker.client import DockerUnavailableError
from agentbolt.runner.harness.docker.config import ContainerLimits
from agentbolt.runner.harness.docker.executor import DockerExecutor
from agentbolt.runner.harness.docker.images import ImageNotReadyError

__all__ = [
    "HOST_BASE_IMAGE",
    "ContainerLimits",
    "DockerExecutor",
    "DockerUnavailableError",
    "ImageNotReadyError",
    "build_host_base_image",
]
