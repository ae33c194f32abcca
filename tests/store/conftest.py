"""Fixtures for the store conformance suite.

``store`` runs every conformance test against each backend: the in-memory reference,
SQLite, PostgreSQL (a schema of its own per test, on the server at ``127.0.0.1:5432``,
database ``test``; skipped when that server or psycopg is missing), and the HTTP client
talking to a real server (over SQLite) in a background thread. ``local_store`` covers
only the in-process backends, for tests that share one store object between OS threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentbolt.store.base import Store
from tests.store.postgres_support import postgres_store

DEADLINE_CHECK_INTERVAL = 0.02
"""How often the stores under test look for expired attempts (seconds)."""

ADMIN_TOKEN = "test-admin"

ALL_BACKENDS = ["memory", "sqlite", "postgres", "http"]
IN_PROCESS_BACKENDS = ["memory", "sqlite", "postgres"]

T = TypeVar("T")


@contextlib.asynccontextmanager
async def open_backend(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    """A started store of the given backend id, closed on exit."""
    async with contextlib.AsyncExitStack() as stack:
        store: Store
        if backend == "memory":
            from agentbolt.store.memory import MemoryStore

            store = MemoryStore(deadline_check_interval=DEADLINE_CHECK_INTERVAL)
        elif backend == "sqlite":
            from agentbolt.store.sqlite import SqliteStore

            store = SqliteStore(tmp_path / "store.db", deadline_check_interval=DEADLINE_CHECK_INTERVAL)
        elif backend == "postgres":
            store = postgres_store(deadline_check_interval=DEADLINE_CHECK_INTERVAL)
        elif backend == "http":
            from agentbolt.server.testing import serve_in_thread
            from agentbolt.store.http import HttpStore
            from agentbolt.store.sqlite import SqliteStore

            server_store = SqliteStore(tmp_path / "server.db", deadline_check_interval=DEADLINE_CHECK_INTERVAL)
            base_url = stack.enter_context(serve_in_thread(server_store, admin_token=ADMIN_TOKEN))
            store = HttpStore(base_url, token=ADMIN_TOKEN)
        else:  # pragma: no cover - a typo in a parametrization
            raise ValueError(f"unknown backend id {backend!r}")
        await store.start()
        stack.push_async_callback(store.close)
        yield store


@pytest.fixture(params=ALL_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh, started store for each backend."""
    async with open_backend(request.param, tmp_path) as s:
        yield s


@pytest.fixture(params=IN_PROCESS_BACKENDS)
async def local_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh, started in-process store (one Python object usable from many threads)."""
    async with open_backend(request.param, tmp_path) as s:
        yield s


async def _eventually(
    probe: Callable[[], Awaitable[T]],
    check: Callable[[T], bool],
    *,
    timeout: float = 3.0,
    interval: float = 0.02,
) -> T:
    """Call ``probe`` until ``check`` holds for its result (returned), or fail after
    ``timeout`` seconds showing the last result."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if check(value):
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"condition not reached within {timeout} s; last value: {value!r}")
        await asyncio.sleep(interval)


@pytest.fixture
def eventually() -> Callable[..., Awaitable[Any]]:
    """``await eventually(probe, check)``: poll the store (up to ~3 s) until ``check``
    holds. Deadlines in the tests are 0.1–0.5 s, so the margin absorbs a loaded machine."""
    return _eventually
