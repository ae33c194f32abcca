"""Whether these tests can reach a Docker Engine (the reason they skip when not), and the
base image the example tasks start FROM."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from runner.harness.docker.conftest import REASON

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "harbor_tasks"

needs_docker = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture(scope="session")
def host_base_image() -> str:
    """``agentbolt-base:host`` (this machine's busybox and python3), the example tasks' FROM."""
    if REASON is not None:
        pytest.skip(REASON)
    from agentbolt.runner.harness.docker import build_host_base_image

    return build_host_base_image()


def copy_task(name: str, to: Path) -> Path:
    """A copy of the example task ``name`` under ``to`` (to break it on purpose)."""
    target = to / name
    shutil.copytree(EXAMPLES / name, target)
    return target
