"""Short garbage-collector pauses while a server runs: its startup heap is frozen.

A full (generation 2) collection walks every object the collector tracks. A started
server holds ~100,000 of them (modules, classes, FastAPI's routes, pydantic's schemas),
and walking them took ~100 ms of CPU on the 2-core benchmark machine: at 1,000 proxied
calls/s a full collection came about once a second and stalled every call in flight
(p99 160-330 ms at 16 connections in ``benchmarks/gateway_overhead.py``). Those objects
live as long as the server, so when an app starts, :func:`freeze` moves everything alive
into the permanent generation (``gc.freeze``) and collections walk only what was made
since. Full collections still came ~2 a second at ~10 ms each (every 10th middle
collection; with the old heap frozen the "25 % new" rule no longer holds them back), so
while an app runs a full collection waits for 100 middle ones instead of 10. When the
last app of the process stops, :func:`thaw` gives the frozen objects back to the
collector and restores the thresholds, so a process that starts and stops servers
(tests, a trainer with its own gateway) keeps none of their garbage.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["freeze", "thaw"]

FULL_EVERY = 100
"""Middle (generation 1) collections between two full ones while an app runs (Python: 10)."""

_lock = threading.Lock()
_running = 0
_saved: tuple[int, ...] = ()


def freeze() -> None:
    """An app started: freeze what is alive now (cheap: no collection is run); the first
    one also spaces full collections out (:data:`FULL_EVERY`)."""
    global _running, _saved
    with _lock:
        if _running == 0:
            _saved = gc.get_threshold()
            young, middle, full = _saved
            gc.set_threshold(young, middle, max(full, FULL_EVERY))
        _running += 1
        gc.freeze()


def thaw() -> None:
    """An app stopped: when it was the last one, hand the frozen objects back and restore
    the collector's thresholds."""
    global _running, _saved
    with _lock:
        _running = max(0, _running - 1)
        if _running == 0:
            gc.unfreeze()
            if _saved:
                gc.set_threshold(*_saved)
                _saved = ()
