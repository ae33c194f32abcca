"""The PostgreSQL server the tests use, and stores on it in throwaway schemas.

Tests expect PostgreSQL at ``127.0.0.1:5432`` (trust auth, database ``test``), or the URL
in ``AGENTBOLT_TEST_POSTGRES_URL``; without it (or without psycopg) they are skipped
with the reason.
"""

from __future__ import annotations

import functools
import os
import socket
import uuid
from typing import Any
from urllib.parse import urlsplit

import pytest

__all__ = ["POSTGRES_URL", "new_schema", "postgres_store", "postgres_unavailable", "require_postgres"]

POSTGRES_URL = os.environ.get("AGENTBOLT_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
"""The PostgreSQL database the tests use (each test creates and drops its own schema)."""


@functools.cache
def postgres_unavailable() -> str | None:
    """Why the PostgreSQL tests cannot run here (None when they can)."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install 'agentbolt[postgres]'"
    parts = urlsplit(POSTGRES_URL)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    try:
        with socket.create_connection((host, port), timeout=1):
            pass
    except OSError as exc:
        return f"no PostgreSQL server at {host}:{port} ({exc}); start one or set AGENTBOLT_TEST_POSTGRES_URL"
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=5):
            pass
    except psycopg.Error as exc:
        return f"cannot use PostgreSQL at {POSTGRES_URL} ({' '.join(str(exc).split())})"
    return None


def require_postgres() -> None:
    """Skip the calling test when PostgreSQL is not available."""
    reason = postgres_unavailable()
    if reason is not None:
        pytest.skip(reason)


def new_schema() -> str:
    """A fresh schema name, unique per call."""
    return f"t_{uuid.uuid4().hex[:16]}"


def postgres_store(**kwargs: Any) -> Any:
    """A (not yet started) PostgresStore on the test database in a fresh schema, dropped
    on close. Skips the test when PostgreSQL is not available."""
    require_postgres()
    from agentbolt.store.postgres import PostgresStore

    kwargs.setdefault("schema", new_schema())
    kwargs.setdefault("drop_schema_on_close", True)
    return PostgresStore(POSTGRES_URL, **kwargs)
