"""What some stores can do beyond :class:`~agentbolt.store.base.Store`, declared.

Each optional capability is a small protocol; a caller asks ``isinstance(store, Vacuumable)``
instead of guessing at an attribute name, and a store that gains or loses the capability
fails a type check rather than a probe going quietly ``None``:

==================  ==============================  ===========================
protocol            members                         stores that have it
==================  ==============================  ===========================
:class:`Vacuumable`   ``async vacuum()``              :class:`~agentbolt.store.sqlite.SqliteStore`
:class:`ServerBacked` ``base_url``, ``token``         :class:`~agentbolt.store.http.HttpStore`
:class:`UrlBacked`    ``url`` (a database URL)        :class:`~agentbolt.store.postgres.PostgresStore`
==================  ==============================  ===========================

A wrapper that forwards attribute reads to the store it wraps (Agent Lightning v0.3's
store in :mod:`agentbolt.compat.store`) has the capabilities of what it wraps.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["ServerBacked", "UrlBacked", "Vacuumable"]


@runtime_checkable
class Vacuumable(Protocol):
    """A store whose file can give the space of deleted rows back (SQLite ``VACUUM``)."""

    async def vacuum(self) -> None: ...


@runtime_checkable
class ServerBacked(Protocol):
    """A client of an ``agentbolt server``: the server it talks to, and its token."""

    @property
    def base_url(self) -> str: ...

    token: str | None


@runtime_checkable
class UrlBacked(Protocol):
    """A store opened from a database URL (``postgresql://user:password@host/db``)."""

    url: str
