"""A runner fetches each resources version once, however many attempts need it at once."""

from __future__ import annotations

import asyncio

import pytest

from agentbolt.runner.resources import ResourcesCache
from agentbolt.types import JsonResource, Resources


def resources(version: int) -> Resources:
    return Resources(version=version, resources={"v": JsonResource(value=version)})


async def test_attempts_that_need_a_version_together_share_one_fetch() -> None:
    fetched: list[int] = []

    async def fetch(version: int) -> Resources:
        fetched.append(version)
        await asyncio.sleep(0.01)
        return resources(version)

    cache = ResourcesCache(fetch)
    got = await asyncio.gather(*(cache.get(3) for _ in range(10)))
    assert fetched == [3] and {r.version for r in got} == {3}
    assert (await cache.get(3)).version == 3 and fetched == [3]  # then from the cache


async def test_a_failed_fetch_reaches_its_awaiters_and_the_next_get_tries_again() -> None:
    calls = 0

    async def fetch(version: int) -> Resources:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("server restarting")
        return resources(version)

    cache = ResourcesCache(fetch)
    with pytest.raises(ConnectionError):
        await cache.get(1)
    assert (await cache.get(1)).version == 1 and calls == 2


async def test_only_the_newest_versions_are_kept() -> None:
    fetched: list[int] = []

    async def fetch(version: int) -> Resources:
        fetched.append(version)
        return resources(version)

    cache = ResourcesCache(fetch, size=2)
    for v in (1, 2, 3, 1):
        await cache.get(v)
    assert fetched == [1, 2, 3, 1]  # 1 was evicted by 3
