"""The HTTP client backend: :class:`HttpStore`, the store interface over an agentbolt server.

``client`` is the class; ``transport`` the connection (retries, failover between servers,
one event loop per thread); ``batching`` coalesces concurrent calls into ``POST /v1/batch``.
"""

from agentbolt.store.http.client import HttpStore

__all__ = ["HttpStore"]
