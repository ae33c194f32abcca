"""The Docker tests need a Docker Engine here and the base image built from this machine."""

from __future__ import annotations

import pytest


def _engine_reason() -> str | None:
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (pip install 'agentbolt[docker]')"
    try:
        docker.from_env(timeout=10).ping()
    except Exception as exc:  # noqa: BLE001 - any failure means: no engine to test against
        return f"no Docker Engine answers ({type(exc).__name__}): start dockerd to run these tests"
    return None


REASON = _engine_reason()


@pytest.fixture(scope="session")
def base_image() -> str:
    """``agentbolt-base:host`` (busybox, this machine's python3 and curl), imported once."""
    if REASON is not None:
        pytest.skip(REASON)
    from agentbolt.runner.harness.docker import build_host_base_image

    return build_host_base_image()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if REASON is None:
        return
    for item in items:
        if "runner/harness/docker/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.skip(reason=REASON))
