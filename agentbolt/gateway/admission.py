"""Which calls the gateway lets in: none while it is paused for a weight swap (HTTP 429,
or held up to ``pause_hold_s``), and a count of the calls in flight that :meth:`Admission.drain`
waits on. Every call on every engine replica passes here, so a drain covers them all."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentbolt.gateway.config import GatewayConfig

__all__ = ["Admission", "GatewayPausedError"]


class GatewayPausedError(Exception):
    """The gateway is paused (weights are being swapped): try again in ``retry_after`` s."""

    status_code = 429

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"the gateway is paused while the model's weights are updated: retry in {retry_after} s "
            "(OpenAI clients do this by themselves on 429)"
        )
        self.retry_after = retry_after

    @property
    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": "gateway_paused", "param": None, "code": "gateway_paused"}}


class Admission:
    """The pause flag and the in-flight count. ``pause``/``resume`` are plain flag writes
    (safe from another thread); the rest runs on the gateway's event loop. ``config``'s
    ``retry_after`` and ``pause_hold_s`` are read at each call."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.paused = False
        self.in_flight = 0
        self.admitted = 0
        self._idle: asyncio.Event | None = None

    def reset(self) -> None:
        """Forget the idle event (it belongs to the event loop that is closing)."""
        self._idle = None

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until no call is in flight."""
        if self.in_flight == 0:
            return
        async with asyncio.timeout(timeout):
            await self._idle_event().wait()

    async def admit(self) -> None:
        """:meth:`enter`, after holding the call while paused (``pause_hold_s``)."""
        hold = self.config.pause_hold_s
        if self.paused and hold > 0:
            deadline = time.monotonic() + hold
            while self.paused and time.monotonic() < deadline:
                await asyncio.sleep(0.01)  # a plain flag: pause/resume may come from another thread
        self.enter()

    def enter(self) -> None:
        """Count a call in, or raise :class:`GatewayPausedError` while paused."""
        if self.paused:
            raise GatewayPausedError(self.config.retry_after)
        self.in_flight += 1
        self.admitted += 1
        if self._idle is not None:
            self._idle.clear()

    def exit(self) -> None:
        """Count a call out."""
        self.in_flight -= 1
        if self.in_flight == 0 and self._idle is not None:
            self._idle.set()

    def _idle_event(self) -> asyncio.Event:
        if self._idle is None:
            self._idle = asyncio.Event()
            if self.in_flight == 0:
                self._idle.set()
        return self._idle
