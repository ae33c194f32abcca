"""Handing a write op's outcome to the caller awaiting it (both SQL stores' writers)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["settle"]


def settle(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Resolve ``fut`` with ``value`` (``ok``) or raise it there. A caller that gave up
    (cancelled) is skipped: the write happened anyway."""
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)
