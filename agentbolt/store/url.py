"""Open a store from a URL: ``memory://``, ``sqlite:///path/to.db``, ``http://host:port``,
``postgresql://...`` (extra ``agentbolt[postgres]``)."""

from __future__ import annotations

from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError

__all__ = ["open_store"]


def open_store(url: str, *, token: str | None = None) -> Store:
    """Build (but do not start) the store a URL names.

    ``sqlite:///runs/store.db`` is a relative path, ``sqlite:////abs/store.db`` an
    absolute one; a bare path ending in ``.db`` is taken as SQLite too.
    ``postgresql://user:pw@host:5432/db?schema=agentbolt&pool_max=20`` (or ``postgres://``)
    opens a :class:`~agentbolt.store.postgres.PostgresStore`.
    """
    if url in ("memory", "memory://", "memory:"):
        from agentbolt.store.memory import MemoryStore

        return MemoryStore()
    if url.startswith("sqlite://") or url.endswith((".db", ".sqlite", ".sqlite3")):
        from agentbolt.store.sqlite import SqliteStore

        path = url.removeprefix("sqlite:///")
        if not path:
            raise InvalidRequestError("sqlite URL needs a path: sqlite:///path/to/store.db")
        return SqliteStore(path)
    if url.startswith(("http://", "https://")):
        from agentbolt.store.http import HttpStore

        return HttpStore(url, token=token)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise InvalidRequestError(
                f"the PostgreSQL store needs psycopg 3 and its pool, which are not installed: "
                f"pip install 'agentbolt[postgres]' (asked for {url.split('@')[-1]!r})"
            ) from None
        from agentbolt.store.postgres import PostgresStore

        return PostgresStore(url)
    raise InvalidRequestError(
        f"unknown store URL {url!r}: use memory://, sqlite:///path.db, postgresql://host/db or http://host:port"
    )
