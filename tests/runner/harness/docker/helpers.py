"""What the Docker tests look at: the containers agentbolt left, the sandbox events of a rollout."""

from __future__ import annotations

from typing import Any

import docker

from agentbolt import semconv
from agentbolt.runner.harness.docker.labels import owned
from runner.harness.helpers import Served


def left_over(owner: str) -> list[str]:
    """Names of the containers ``owner`` still has (running or not)."""
    client = docker.from_env()
    # the low-level list: no inspect per container, which races with a container being removed
    return [str(c["Names"][0]).lstrip("/") for c in client.api.containers(all=True, filters=owned(owner))]


async def sandbox_events(served: Served, rollout: Any) -> dict[str, str]:
    """kind -> detail of the rollout's latest attempt's ``agentbolt.sandbox`` spans."""
    spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
    return {str(s.attributes[semconv.SANDBOX_KIND]): str(s.attributes[semconv.SANDBOX_DETAIL])
            for s in spans if s.name == semconv.SANDBOX_SPAN}
