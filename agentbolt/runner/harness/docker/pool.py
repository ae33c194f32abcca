"""A warm pool: containers started ahead of claims, so a claim pays no container start-up.

Each pool container runs the launch wait (:data:`~.launch.WAIT`) with its own run
directory mounted; a claim takes one, writes the run's launch script into it, and the
program starts at once. Pool containers are used once and removed after their run; the
pool starts a replacement in the background. They carry the label
``agentbolt.kind=warm`` (renamed with the attempt's id when claimed), so the reaper
removes those a killed runner left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from agentbolt.runner.harness.docker.container import Slot

__all__ = ["WarmPool"]

log = logging.getLogger("agentbolt.runner.harness.docker")


class WarmPool:
    """``size`` started containers of one image; ``make`` a run directory, ``start`` its container."""

    def __init__(self, size: int, make: Callable[[], Slot], start: Callable[[str, Slot], None]) -> None:
        self.size = size
        self.make = make
        self.start = start
        self.tag: str | None = None
        self.ready: list[Slot] = []
        self.starting = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.closed = False

    def fill_in_background(self, tag: str) -> None:
        """Start containers of ``tag`` until ``size`` are ready or starting."""
        if self.size == 0 or self.closed:
            return
        self.tag = tag
        while len(self.ready) + self.starting < self.size:
            self.starting += 1
            task = asyncio.ensure_future(self._add(tag))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def fill(self, tag: str) -> None:
        """Start containers of ``tag`` and wait until ``size`` are ready."""
        self.fill_in_background(tag)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def take(self, tag: str) -> Slot | None:
        """A started container of ``tag``, or None (then the run starts one cold)."""
        if self.tag != tag or not self.ready:
            if self.size:
                self.fill_in_background(tag)
            return None
        slot = self.ready.pop(0)
        self.fill_in_background(tag)
        return slot

    async def close(self) -> None:
        self.closed = True  # containers still starting are removed as soon as they are up
        with contextlib.suppress(Exception):
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        slots, self.ready = self.ready, []
        for slot in slots:
            await asyncio.to_thread(_remove, slot)

    async def _add(self, tag: str) -> None:
        slot: Slot | None = None
        try:
            slot = await asyncio.to_thread(self.make)
            await asyncio.to_thread(self.start, tag, slot)
            if self.closed:
                await asyncio.to_thread(_remove, slot)
            else:
                self.ready.append(slot)
        except Exception as exc:  # noqa: BLE001 - the next claim starts cold; say why the pool is short
            log.warning("could not start a warm container of %s: %s", tag, exc)
            if slot is not None:
                await asyncio.to_thread(_remove, slot)
        finally:
            self.starting -= 1


def _remove(slot: Slot) -> None:
    if slot.container is not None:
        with contextlib.suppress(Exception):
            slot.container.remove(force=True, v=True)
    slot.remove_files()
