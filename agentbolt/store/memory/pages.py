"""Sorting and keyset pages over :class:`~agentbolt.store.memory.MemoryStore`'s lists.

The same order and cursors as the SQL backends (:mod:`agentbolt.store.sql.pagination`):
``None`` before every value, ties broken by enqueue order (``created_at``) or by id. Each
function takes the rows its caller gathered under the store's lock and returns the page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentbolt.store.errors import InvalidRequestError
from agentbolt.store.pagination import encode_cursor, sort_tuple
from agentbolt.types import Page, Resources, Rollout, Span

__all__ = ["resources_page", "rollout_page", "span_page"]

_FIELDS: dict[str, Callable[[Rollout], Any]] = {
    "updated_at": lambda r: r.updated_at,
    "rollout_id": lambda r: r.rollout_id,
    "reward": lambda r: r.reward,
    "start_time": lambda r: r.start_time,
    "end_time": lambda r: r.end_time,
    "attempt_count": lambda r: r.attempt_count,
}
"""The plain-field sort keys of :data:`~agentbolt.store.pagination.ROLLOUT_SORT_KEYS`
(``created_at`` and ``duration`` are computed)."""


def rollout_page(
    rows: list[Rollout],
    enqueue_order: Callable[[str], int],
    *,
    sort_by: str,
    descending: bool,
    limit: int,
    after: tuple[Any, str] | None,
) -> Page[Rollout]:
    """One page of ``rows`` (copies), sorted by ``sort_by`` and starting after ``after``."""

    def key(r: Rollout) -> tuple[int, Any, str]:
        if sort_by == "created_at":
            # enqueue order breaks ties among equal timestamps
            return sort_tuple((r.created_at, enqueue_order(r.rollout_id)), r.rollout_id)
        if sort_by == "duration":
            duration = r.end_time - r.start_time if r.end_time is not None and r.start_time is not None else None
            return sort_tuple(duration, r.rollout_id)
        return sort_tuple(_FIELDS[sort_by](r), r.rollout_id)

    rows.sort(key=key, reverse=descending)
    if after is not None:
        value, rid = after
        if sort_by == "created_at" and isinstance(value, list):
            value = tuple(value)
        pivot = sort_tuple(value, rid)
        try:
            rows = [r for r in rows if (key(r) < pivot if descending else key(r) > pivot)]
        except TypeError:
            raise InvalidRequestError(
                "invalid cursor for this query: pass back a next_cursor from the same query"
            ) from None
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        last = page[-1]
        v = key(last)
        next_cursor = encode_cursor(None if v[0] == 0 else v[1], last.rollout_id)
    return Page[Rollout](items=[r.model_copy(deep=True) for r in page], next_cursor=next_cursor)


def span_page(
    rows: list[tuple[tuple[int, int], Span]], *, limit: int, after: tuple[Any, str] | None
) -> Page[Span]:
    """One page of spans keyed by ``(attempt sequence, span sequence)``, then span id."""
    rows.sort(key=lambda x: (x[0], x[1].span_id))
    if after is not None:
        (av, sv), sid = after
        rows = [x for x in rows if (x[0], x[1].span_id) > ((av, sv), sid)]
    page = rows[:limit]
    next_cursor = encode_cursor(list(page[-1][0]), page[-1][1].span_id) if len(rows) > limit else None
    return Page[Span](items=[s for _, s in page], next_cursor=next_cursor)


def resources_page(resources: Sequence[Resources], *, limit: int, after: tuple[Any, str] | None) -> Page[Resources]:
    """One page of resource versions (copies), newest first."""
    rows = list(reversed(resources))
    if after is not None:
        rows = [r for r in rows if r.version < int(after[0])]
    page = rows[:limit]
    nxt = encode_cursor(page[-1].version, str(page[-1].version)) if len(rows) > limit else None
    return Page[Resources](items=[r.model_copy(deep=True) for r in page], next_cursor=nxt)
