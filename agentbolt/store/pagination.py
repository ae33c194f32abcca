"""Keyset (cursor) pagination shared by the backends.

A cursor is an opaque, URL-safe string holding the sort value and id of the last item
of the previous page. Keyset pages stay correct while rows are being added, and cost the
same on page 1 and page 10,000.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from agentbolt.store.errors import InvalidRequestError

ROLLOUT_SORT_KEYS = (
    "created_at",
    "updated_at",
    "rollout_id",
    "reward",
    "start_time",
    "end_time",
    "duration",
    "attempt_count",
)
"""Keys rollouts can be sorted by. ``duration`` is ``end_time - start_time`` (None until
the rollout has finished); None sorts before every value."""


def encode_cursor(sort_value: Any, item_id: str) -> str:
    raw = orjson.dumps([sort_value, item_id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[Any, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value, item_id = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(item_id, str):
            raise ValueError
        return value, item_id
    except Exception:  # noqa: BLE001 — any undecodable cursor is the caller's error
        raise InvalidRequestError(
            f"invalid cursor {cursor[:80]!r}: pass back a next_cursor from a previous page"
        ) from None


def check_sort_key(sort_by: str) -> None:
    if sort_by not in ROLLOUT_SORT_KEYS:
        raise InvalidRequestError(f"cannot sort rollouts by {sort_by!r}; choose one of {', '.join(ROLLOUT_SORT_KEYS)}")


def check_limit(limit: int, maximum: int = 10_000) -> None:
    if not 1 <= limit <= maximum:
        raise InvalidRequestError(f"limit must be between 1 and {maximum}, got {limit}")


def sort_tuple(value: Any, item_id: str) -> tuple[int, Any, str]:
    """Order used everywhere: None sorts before any value, ties broken by id."""
    return (0, 0, item_id) if value is None else (1, value, item_id)


MAX_CAP = 2**62
"""Largest count cap (SQLite and PostgreSQL integers are 64-bit)."""


def check_cap(cap: int | None) -> None:
    if cap is not None and not 1 <= cap <= MAX_CAP:
        raise InvalidRequestError(f"cap must be between 1 and {MAX_CAP} (or None for an exact count), got {cap}")
