"""v0.3's ``PaginatedResult``: an agentbolt :class:`~agentbolt.types.Page` that is also a
sequence of its items, as v0.3's query results were.

``for span in page``, ``len(page)``, ``page[0]`` and ``x in page`` see ``page.items`` (an
empty page is falsy), so v0.3 code that treats a result as a list works; the cursor stays
on ``page.next_cursor`` (v0.3's ``offset``/``total`` are not kept). agentbolt's own
``Page`` is a page, not a list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar, overload

from agentbolt.types import Page

__all__ = ["PaginatedResult"]

T = TypeVar("T")


class PaginatedResult(Page[T], Generic[T]):
    """A :class:`~agentbolt.types.Page` that iterates, indexes and counts its items."""

    @classmethod
    def of(cls, page: Page[T]) -> PaginatedResult[T]:
        """The same page, list-like."""
        return cls(items=page.items, next_cursor=page.next_cursor)

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]  # items, not (field, value) pairs
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        return self.items[index]

    def __contains__(self, item: object) -> bool:
        return item in self.items
