"""Job creation is rate-limited: a burst of ``rate``, then one every ``1/rate`` s."""

from __future__ import annotations

import asyncio

import pytest

from agentbolt.runner.harness.kubernetes import rate


async def test_creations_beyond_the_burst_wait_their_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    waited: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:  # a clock that moves only when someone waits
        waited.append(seconds)
        now[0] += seconds
        await real_sleep(0)

    monkeypatch.setattr(rate.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(rate.asyncio, "sleep", sleep)
    limit = rate.RateLimit(2.0)
    stamps = []
    for _ in range(5):
        await limit.acquire()
        stamps.append(now[0] - 100.0)
    assert stamps == [0.0, 0.0, 0.5, 1.0, 1.5]  # two at once, then one every half second
