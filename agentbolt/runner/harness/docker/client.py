"""The Docker Engine client (the ``docker`` SDK), and what to do when it is missing."""

from __future__ import annotations

from typing import Any

from agentbolt.runner.harness.errors import HarnessConfigError

__all__ = ["DockerUnavailableError", "docker_client"]


class DockerUnavailableError(HarnessConfigError):
    """No Docker Engine to talk to (the SDK is not installed, or no daemon answers)."""


def docker_client(base_url: str | None = None, timeout: float = 120.0) -> Any:
    """A ``docker.DockerClient`` for ``base_url`` (default: ``$DOCKER_HOST`` or the local socket)."""
    try:
        import docker
    except ImportError:
        raise DockerUnavailableError(
            "DockerExecutor needs the Docker SDK: pip install 'agentbolt[docker]' (or pip install docker)"
        ) from None
    try:
        client = (
            docker.DockerClient(base_url=base_url, timeout=int(timeout))
            if base_url
            else docker.from_env(timeout=int(timeout))
        )
        client.ping()
    except Exception as exc:  # noqa: BLE001 - the SDK raises requests' and its own errors alike
        raise DockerUnavailableError(
            f"no Docker Engine answers at {base_url or 'the default socket ($DOCKER_HOST or /var/run/docker.sock)'}: "
            f"{exc}. Start dockerd (apt-get install docker.io; dockerd), or give DockerExecutor(base_url=...)"
        ) from None
    return client
