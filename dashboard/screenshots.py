"""Screenshots of every dashboard page, for docs/dashboard.md.

Fills a temporary SQLite store with real runs (``real_runs.py``: APO with a scripted
critic, GRPO on a tiny model behind the gateway, the calculator agent evaluated through
the gateway; about a minute and a half of CPU), serves it, opens each page in headless
Chromium (Debian's ``chromium``, driven by Playwright) and writes
``docs/img/dashboard-<page>.png``.

    python dashboard/screenshots.py            # after `npm run build`
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from dashboard.browser import launch, missing_reason, settings_script
from real_runs import GRPO_RUN, fill_real_store

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import SqliteStore

TOKEN = "screenshot-admin-token"
OUT = ROOT / "docs" / "img"
VIEWPORT = {"width": 1440, "height": 900}


def main() -> None:
    reason = missing_reason()
    if reason:
        sys.exit(f"cannot take screenshots: {reason}")
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        real = fill_real_store(Path(tmp) / "store.db")
        filled = real.filled
        with serve_in_thread(SqliteStore(filled.path), admin_token=TOKEN) as url, sync_playwright() as p:
            browser = launch(p)
            context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
            context.add_init_script(settings_script(TOKEN))
            page = context.new_page()

            def capture(name: str) -> None:
                """The whole page: the window grown to its height (the frame stays whole)."""
                page.wait_for_timeout(400)  # let the fonts and charts settle
                height = page.evaluate("document.documentElement.scrollHeight")
                page.set_viewport_size({**VIEWPORT, "height": max(VIEWPORT["height"], height)})
                page.wait_for_timeout(200)
                target = OUT / f"dashboard-{name}.png"
                page.screenshot(path=str(target))
                page.set_viewport_size(VIEWPORT)
                print(f"wrote {target.relative_to(ROOT)}")

            def shot(name: str, path: str, ready: str) -> None:
                page.goto(url + path)
                page.locator(ready).first.wait_for()
                capture(name)

            shot("rollouts", "/rollouts", "[data-testid=rollout-row]")
            shot("rollout", f"/rollouts/{filled.retried}", "[data-testid=waterfall-row]")
            page.get_by_test_id("tab-calls").click()
            page.locator("[data-testid=model-call]").first.wait_for()
            capture("calls")
            shot("training", "/training", f"[data-testid=chart][data-key='reward/mean'][data-points='{real.grpo_steps}']")
            assert page.get_by_test_id("run-select").input_value() == GRPO_RUN
            shot("resources", f"/resources?version={real.apo_best_version}", "[data-testid=diff-add]")
            shot("workers", "/workers", "[data-testid=worker-row]")
            browser.close()


if __name__ == "__main__":
    main()
