"""Fixtures of the dashboard's browser tests: one store filled by a real run, served
with an admin token, and headless Chromium (skipped, saying why, when it is missing)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import SqliteStore
from dashboard.browser import launch, missing_reason, settings_script
from dashboard.filled_store import FilledStore, fill_store

TOKEN = "dash-e2e-admin-token"


@pytest.fixture(scope="session")
def filled(tmp_path_factory: pytest.TempPathFactory) -> FilledStore:
    return fill_store(tmp_path_factory.mktemp("dashboard") / "store.db")


@pytest.fixture(scope="session")
def server(filled: FilledStore) -> Iterator[str]:
    with serve_in_thread(SqliteStore(filled.path), admin_token=TOKEN) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped: Playwright's sync API runs an event loop in this thread while it is
    open, and tests elsewhere that call ``asyncio.run`` must not see it."""
    reason = missing_reason()
    if reason:
        pytest.skip(f"dashboard browser tests need Playwright and Chromium: {reason}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser profile that has the admin token saved (as after entering it once)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(settings_script(TOKEN))
    context.set_default_timeout(10_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, f"the page raised: {errors}"


@pytest.fixture
def bare_page(browser: Any) -> Iterator[Any]:
    """A fresh browser profile with nothing saved."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(10_000)
    pg = context.new_page()
    yield pg
    context.close()
