"""Open the store a ``--store`` URL names, run one async query, close it again.

The inspection commands only read, so they refuse URLs that could not hold anything
worth reading: ``memory://`` (a new, empty store in this process) and a SQLite path
whose file does not exist (opening it would create an empty database).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from agentbolt.cli.failures import USAGE_ERROR, CliFailure
from agentbolt.store import Store, open_store

__all__ = ["DEFAULT_STORE_URL", "open_existing_store", "query_store", "sqlite_path"]

DEFAULT_STORE_URL = "sqlite:///agentbolt.db"
"""Where ``agentbolt server`` keeps its data by default, so both agree out of the box."""

T = TypeVar("T")


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite store URL points at, or None for other URLs.

    Mirrors :func:`agentbolt.store.open_store`: ``sqlite:///rel.db`` is relative,
    ``sqlite:////abs.db`` absolute, and a bare ``*.db`` path is SQLite too.
    """
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///") :]) if len(url) > len("sqlite:///") else None
    if not url.startswith(("sqlite://", "http://", "https://", "memory", "postgres")) and url.endswith(
        (".db", ".sqlite", ".sqlite3")
    ):
        return Path(url)
    return None


def open_existing_store(url: str, token: str | None) -> Store:
    """Build the store for ``url``; refuse ones that would start out empty."""
    if url.strip() in ("memory", "memory:", "memory://"):
        raise CliFailure(
            "memory:// is a new, empty store inside this command; point --store at the store "
            "you want to inspect: sqlite:///path/to/store.db or http://host:port",
            USAGE_ERROR,
        )
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise CliFailure(
            f"no store at {path}: the file does not exist (check --store, or create one with "
            f"`agentbolt server --store sqlite:///{path}`)",
            USAGE_ERROR,
        )
    return open_store(url, token=token)


def query_store(url: str, token: str | None, query: Callable[[Store], Awaitable[T]]) -> T:
    """Open the store, ``await query(store)``, close the store; return the result."""
    store = open_existing_store(url, token)

    async def main() -> T:
        async with store:
            return await query(store)

    return asyncio.run(main())
