"""The only network a harnessed program may reach: its attempt's gateway and reward routes.

A :class:`GatewayRoutes` names them for one attempt; executors that isolate the program
(the bubblewrap sandbox, a container, a pod) let exactly these through and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

__all__ = ["GatewayRoutes", "loopback_url"]


@dataclass(frozen=True)
class GatewayRoutes:
    """The attempt's routes on the agentbolt server at ``server_url`` (as this machine reaches it)."""

    server_url: str
    rollout_id: str
    attempt_id: str

    @property
    def prefixes(self) -> list[str]:
        """Paths a request may start with: the attempt's model gateway."""
        base = urlsplit(self.server_url).path.rstrip("/")
        rid, aid = quote(self.rollout_id, safe=""), quote(self.attempt_id, safe="")
        return [f"{base}/rollout/{rid}/attempt/{aid}/"]

    @property
    def exact(self) -> list[str]:
        """Paths a request may equal: the attempt's own reward route."""
        base = urlsplit(self.server_url).path.rstrip("/")
        rid, aid = quote(self.rollout_id, safe=""), quote(self.attempt_id, safe="")
        return [f"{base}/v1/rollouts/{rid}/attempts/{aid}/reward"]


def loopback_url(server_url: str) -> tuple[int, str]:
    """The loopback port and URL a relay inside an isolated program's world listens on
    for ``server_url`` (the same port when it is not privileged, else 18080)."""
    parts = urlsplit(server_url.rstrip("/"))
    port = parts.port or (443 if parts.scheme == "https" else 80)
    inner = port if port >= 1024 else 18080
    return inner, f"http://127.0.0.1:{inner}{parts.path}"
