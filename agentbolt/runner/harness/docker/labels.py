"""The labels agentbolt puts on what it creates in Docker, and how it finds its own again."""

from __future__ import annotations

__all__ = ["ATTEMPT", "KIND", "MANAGED_BY", "MANAGER", "OWNER", "ROLLOUT", "owned"]

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "agentbolt"
OWNER = "agentbolt.owner"
"""Which executor made it: its ``owner`` (stable across restarts, so a restarted runner
finds the orphans of the one killed before it)."""
ROLLOUT = "agentbolt.rollout-id"
ATTEMPT = "agentbolt.attempt-id"
KIND = "agentbolt.kind"
"""``program``, ``evaluator``, ``warm`` (a pool container not yet claimed) or ``snapshot``."""


def owned(owner: str) -> dict[str, list[str]]:
    """A Docker ``filters`` value matching everything ``owner`` made."""
    return {"label": [f"{MANAGED_BY}={MANAGER}", f"{OWNER}={owner}"]}
