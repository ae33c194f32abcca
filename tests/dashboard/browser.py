"""Headless Chromium (Debian's ``chromium``) driven by Playwright, for the dashboard's
tests, screenshots and benchmark: no browser download, the system one is used."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
SETTINGS_KEY = "agentbolt.dashboard.settings"  # dashboard/src/settings.ts


def chromium_path() -> str | None:
    """The system Chromium (``AGENTBOLT_CHROMIUM`` overrides), or None when there is none."""
    override = os.environ.get("AGENTBOLT_CHROMIUM")
    if override:
        return override if os.path.exists(override) else None
    for path in CHROMIUM_CANDIDATES:
        if os.path.exists(path):
            return path
    return shutil.which("chromium")


def missing_reason() -> str | None:
    """Why the browser tests cannot run here (None when they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python 'playwright' package is not installed (pip install -e '.[dev]')"
    if chromium_path() is None:
        return "no system Chromium: apt-get install -y chromium (or set AGENTBOLT_CHROMIUM)"
    return None


def launch(playwright: Any) -> Any:
    """A headless Chromium browser (``--no-sandbox``: CI runs as root)."""
    return playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])


def settings_script(token: str | None, server_url: str = "") -> str:
    """An init script putting the dashboard's settings in localStorage before the page
    loads, as a user who entered them once would have them."""
    value = json.dumps({"serverUrl": server_url, "token": token or ""})
    return f"window.localStorage.setItem({json.dumps(SETTINGS_KEY)}, {json.dumps(value)});"
