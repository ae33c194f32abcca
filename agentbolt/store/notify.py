"""Wake waiters when the store changes, across threads and event loops.

``wait_for_rollouts`` sleeps on this instead of polling the database in a tight loop.
A backend calls :meth:`ChangeNotifier.notify` after a commit that finished a rollout;
waiters in any event loop of the process wake up and re-check.
"""

from __future__ import annotations

import asyncio
import threading


class ChangeNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self.generation = 0

    def notify(self) -> None:
        with self._lock:
            self.generation += 1
            waiters, self._waiters = self._waiters, set()
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_resolve, fut)
            except RuntimeError:  # loop closed
                pass

    async def wait(self, timeout: float, since_generation: int | None = None) -> bool:
        """Wait up to ``timeout`` seconds for a notify. Returns True if one came.

        Pass the ``generation`` read before checking the condition, so that a change
        which happened in between is not missed.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            if since_generation is not None and self.generation != since_generation:
                return True
            self._waiters.add(entry)
        try:
            await asyncio.wait_for(fut, timeout=max(0.0, timeout))
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                self._waiters.discard(entry)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
