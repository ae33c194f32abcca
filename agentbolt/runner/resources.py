"""The resources versions a runner has fetched: each version once, shared by the attempts
that need it at the same time.

Each GRPO publish makes a new version, and every attempt claimed just after it needs that
version; they share one request instead of each fetching it on its own.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from agentbolt.types import Resources

__all__ = ["ResourcesCache"]


class ResourcesCache:
    """The last ``size`` resources versions, fetched with ``fetch(version)`` on first use."""

    def __init__(self, fetch: Callable[[int], Awaitable[Resources]], size: int = 16) -> None:
        self._fetch = fetch
        self._size = size
        self._versions: OrderedDict[int, Resources] = OrderedDict()
        self._fetching: dict[int, asyncio.Future[Resources]] = {}

    async def get(self, version: int) -> Resources:
        """Version ``version``; a fetch already under way is joined, not repeated."""
        cached = self._versions.get(version)
        if cached is not None:
            return cached
        fetch = self._fetching.get(version)
        if fetch is None or fetch.get_loop() is not asyncio.get_running_loop():
            fetch = self._fetching[version] = asyncio.ensure_future(self._fetch_once(version))
            fetch.add_done_callback(lambda f: f.cancelled() or f.exception())  # a failure is the awaiters' to see
        return await asyncio.shield(fetch)  # one attempt stopped does not cancel the others' fetch

    async def _fetch_once(self, version: int) -> Resources:
        try:
            resources = await self._fetch(version)
            self._versions[version] = resources
            if len(self._versions) > self._size:
                self._versions.popitem(last=False)
            return resources
        finally:  # a failed fetch is tried again by the next attempt
            if self._fetching.get(version) is asyncio.current_task():
                del self._fetching[version]
