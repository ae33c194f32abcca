"""A token bucket: at most ``rate`` Job creations a second, bursts of as many."""

from __future__ import annotations

import asyncio
import time

__all__ = ["RateLimit"]


class RateLimit:
    def __init__(self, rate: float) -> None:
        if rate <= 0:
            raise ValueError(f"creations_per_second must be positive, got {rate}")
        self.rate = rate
        self.capacity = max(1.0, rate)
        self.tokens = self.capacity
        self.stamp = time.monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self.lock:
            while True:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                await asyncio.sleep((1 - self.tokens) / self.rate)
