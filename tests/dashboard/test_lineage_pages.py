"""The dashboard explains where training data went, in a real headless browser: a
rollout's Samples tab draws its conversations as a tree — the sub-agent's conversation a
branch, the compacted history under the sample it diverged from, with the break cause —
and marks the calls that train; the Training page shows per step "rows in → rows
trained", the dropped rows by reason, and why a step trained nothing. The store holds
hand-built gateway spans of such a rollout and a GRPO run's row metrics
(``lineage_store.py``); ``test_lineage_real_run.py`` checks the same pages on a real run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api", reason="the dashboard browser tests need the 'playwright' package (pip install -e '.[dev]')"
)
from playwright.sync_api import expect

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import SqliteStore
from dashboard.conftest import TOKEN
from dashboard.filled_store import run_async
from dashboard.lineage_store import MAIN_SYSTEM, ROWS_RUN, add_lineage_rollout, row_records


@pytest.fixture
def lineage_server(tmp_path: Path) -> Any:
    path = tmp_path / "lineage.db"

    async def fill() -> str:
        async with SqliteStore(path) as store:
            rid = await add_lineage_rollout(store)
            await store.add_metrics(row_records())
            return rid

    rollout_id = run_async(fill())
    with serve_in_thread(SqliteStore(path), admin_token=TOKEN) as url:
        yield url, rollout_id


def open_two_conversations(page: Any, rollout_url: str) -> tuple[Any, Any]:
    """Open a rollout's Samples tab, see its 3 samples in 2 conversations; returns the main
    conversation and the branch."""
    page.goto(rollout_url)
    page.get_by_test_id("tab-samples").click()
    expect(page.get_by_test_id("lineage-samples")).to_have_text("3 samples")
    conversations = page.get_by_test_id("lineage-conversation")
    expect(conversations).to_have_count(2)
    return conversations.nth(0), conversations.nth(1)


def test_a_rollout_s_samples_show_as_a_tree_with_the_break_causes(page: Any, lineage_server: Any) -> None:
    url, rollout_id = lineage_server
    main, branch = open_two_conversations(page, f"{url}/rollouts/{rollout_id}")
    expect(branch).to_contain_text("Conversation 1: branch — explorer")
    expect(branch.get_by_test_id("lineage-cause")).to_have_text("new_conversation")
    # the compaction's sample hangs under the first sample of the main conversation, and says where it diverged
    first = main.locator("[data-testid=lineage-sample][data-cause=first]")
    expect(first).to_contain_text("Sample 0")
    diverged = main.locator("li li [data-testid=lineage-sample][data-cause=diverged]")
    expect(diverged).to_contain_text("Sample 2")
    expect(diverged.get_by_test_id("lineage-why")).to_contain_text(
        f"history rewritten (compaction, an edited or dropped turn, stripped reasoning); shares tokens "
        f"0–{len(MAIN_SYSTEM) - 1} with sample 0, differs from token {len(MAIN_SYSTEM)}")
    expect(page.locator("[data-testid=lineage-break]")).to_have_text(["1 new_conversation", "1 diverged"])
    # every call trains until agent_match picks the explorer: then only its calls do
    expect(page.locator("[data-testid=lineage-call][data-trained=true]")).to_have_count(6)
    page.get_by_test_id("lineage-agent-match").fill("^explorer$")
    trained = page.locator("[data-testid=lineage-call][data-trained=true]")
    expect(trained).to_have_text(["s1 trained", "s2 trained"])


def test_the_training_page_says_rows_in_trained_and_why_a_step_trained_nothing(page: Any, lineage_server: Any) -> None:
    url, _ = lineage_server
    page.goto(url + "/training")
    expect(page.get_by_test_id("run-select")).to_have_value(ROWS_RUN)
    steps = page.get_by_test_id("rows-step")
    expect(steps).to_have_count(2)
    newest, oldest = steps.nth(0), steps.nth(1)
    expect(oldest.get_by_test_id("rows-flow")).to_have_text("8 → 6")
    expect(oldest.get_by_test_id("rows-dropped")).to_have_text(["failed 2"])
    expect(oldest.get_by_test_id("why-nothing-trained")).to_have_count(0)
    expect(newest.get_by_test_id("rows-flow")).to_have_text("8 → 0")
    expect(newest.get_by_test_id("rows-dropped")).to_have_text(["zero_variance 8"])
    expect(newest.get_by_test_id("why-nothing-trained")).to_have_text(
        "Trained nothing: all 2 groups had zero reward variance (8 rollouts)")
