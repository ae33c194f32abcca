"""The dashboard in a real headless browser, against a server over a store filled by a
short real run (``filled_store.py``): each page shows what the store holds, filters and
navigation work, curves grow while the page is open, the token is entered once."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api", reason="the dashboard browser tests need the 'playwright' package (pip install -e '.[dev]')"
)
from playwright.sync_api import expect

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import SqliteStore
from dashboard.conftest import TOKEN
from dashboard.filled_store import (
    LIVE_WORKER,
    PROMPT_V2,
    RUN_ID,
    FilledStore,
    add_metric_steps,
    run_async,
)

ROWS = "[data-testid=rollout-row]"


def all_rollouts(filled: FilledStore) -> set[str]:
    return set(filled.rollout_ids) | set(filled.queued)


def test_rollouts_page_lists_every_rollout_with_its_status(page: Any, server: str, filled: FilledStore) -> None:
    page.goto(server + "/")
    rows = page.locator(ROWS)
    expect(rows).to_have_count(len(all_rollouts(filled)))
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.rolloutId)")) == all_rollouts(filled)
    failed = page.locator(f"{ROWS}[data-rollout-id='{filled.failed[0]}']")
    expect(failed.get_by_test_id("status-badge")).to_have_text("failed")
    expect(page.get_by_test_id("rollout-total")).to_contain_text(str(len(all_rollouts(filled))))
    expect(page.get_by_test_id("health-badge")).to_have_attribute("data-health", "ok")
    # the first page was asked for by index.html while the scripts loaded, and taken by the app
    assert page.evaluate("() => window.__agentboltPrefetch === undefined")


def test_filter_by_status_and_search(page: Any, server: str, filled: FilledStore) -> None:
    page.goto(server + "/rollouts")
    expect(page.locator(ROWS)).to_have_count(len(all_rollouts(filled)))
    page.get_by_test_id("filter-status-failed").click()
    expect(page.locator(ROWS)).to_have_count(len(filled.failed))
    assert page.locator(ROWS).first.get_attribute("data-rollout-id") == filled.failed[0]
    assert "status=failed" in page.url  # the filter is in the address: shareable, survives a reload
    page.get_by_test_id("filter-status-succeeded").click()
    expect(page.locator(ROWS)).to_have_count(len(filled.failed) + len(filled.succeeded))
    page.goto(server + "/rollouts")
    page.get_by_test_id("rollout-search").fill(filled.retried[-10:])
    expect(page.locator(ROWS)).to_have_count(1)
    assert page.locator(ROWS).first.get_attribute("data-rollout-id") == filled.retried


def test_sort_by_reward_and_pages(page: Any, server: str, filled: FilledStore) -> None:
    page.goto(server + "/rollouts?limit=10&status=succeeded&status=failed&sort_by=reward&descending=false")
    expect(page.locator(ROWS)).to_have_count(len(filled.rollout_ids))
    rewards = [float(t) for t in page.locator("[data-testid=rollout-reward]").all_inner_texts()]
    assert rewards == sorted(rewards)
    page.goto(server + "/rollouts?limit=10")  # 9 rollouts: one page
    expect(page.locator(ROWS)).to_have_count(len(all_rollouts(filled)))
    expect(page.get_by_test_id("page-next")).to_be_disabled()


def test_rollout_detail_shows_attempts_waterfall_and_model_calls(page: Any, server: str, filled: FilledStore) -> None:
    page.goto(server + "/rollouts")
    page.locator(f"{ROWS}[data-rollout-id='{filled.retried}']").click()
    expect(page.get_by_test_id("rollout-title")).to_have_text(filled.retried)
    attempts = page.get_by_test_id("attempt-row")
    expect(attempts).to_have_count(2)  # the first try raised a RetryableError
    expect(attempts.first.get_by_test_id("attempt-error")).to_contain_text("tool was busy")
    # the waterfall of the latest attempt: rollout > plan, reward, check; the model call
    rows = page.get_by_test_id("waterfall-row")
    expect(rows.first).to_be_visible()
    kinds = rows.evaluate_all("rs => rs.map(r => r.dataset.kind)")
    assert {"agent", "llm", "reward"} <= set(kinds), kinds
    names = rows.all_inner_texts()
    assert any(n.startswith("plan") for n in names) and any(n.startswith("check") for n in names), names
    expect(page.get_by_test_id("waterfall-reward")).to_have_count(2)  # format, then the returned reward
    # the tracer sent the caller's traceparent with the call, so the gateway recorded it under
    # the span that made it: a true child inside the rollout, not one placed by time
    call_row = page.locator("[data-testid=waterfall-row][data-kind=llm]")
    expect(call_row).to_have_count(1)
    assert call_row.get_attribute("data-placed") is None
    expect(call_row.get_by_test_id("placed-by-time")).to_have_count(0)
    padding = call_row.locator(".wf-name").evaluate("e => parseFloat(getComputedStyle(e).paddingLeft)")
    assert padding >= 14  # depth 1 or more: inside agentbolt.rollout
    assert rows.first.get_attribute("data-placed") is None  # agentbolt.rollout: a true root
    rows.filter(has_text="plan").first.click()
    expect(page.get_by_test_id("span-details")).to_contain_text("agentbolt.operation")
    # the model calls: prompt and response text, tokens, logprobs, policy version
    page.get_by_test_id("tab-calls").click()
    call = page.get_by_test_id("model-call")
    expect(call).to_have_count(1)
    expect(call).to_contain_text("policy v1")
    expect(call.get_by_test_id("prompt-message").nth(1)).to_contain_text("Question: 2 + 2")
    expect(call.get_by_test_id("response-text")).to_have_text("the answer is four")
    expect(call.get_by_test_id("call-logprobs")).to_contain_text("n=4")
    # the first attempt: no model call (it failed before asking)
    attempts.first.click()
    expect(page.get_by_test_id("tab-calls")).to_contain_text("(0)")


def answering_agent(task: Any) -> str:
    """Emits its reward and returns its answer (Agent Lightning's guides do this)."""
    import agentbolt

    agentbolt.emit_reward(1.0)
    return f"the capital is {task['capital']}"


def test_the_rollout_page_shows_what_the_agent_returned(page: Any, tmp_path: Any) -> None:
    import agentbolt
    from agentbolt.algorithms import Evaluate

    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "answers.db"
    trainer = agentbolt.Trainer(algorithm=Evaluate(show=False, progress=False), store=f"sqlite:///{path}")
    with ThreadPoolExecutor(1) as pool:  # Playwright's event loop runs in this thread
        result = pool.submit(trainer.fit, answering_agent, [{"capital": "Paris"}]).result()
    (row,) = result.rows
    with serve_in_thread(SqliteStore(path), admin_token=TOKEN) as url:
        page.goto(f"{url}/rollouts/{row.rollout_id}")
        expect(page.get_by_test_id("rollout-output")).to_have_text("the capital is Paris")


def test_a_rollout_id_in_the_address_opens_its_page(page: Any, server: str, filled: FilledStore) -> None:
    page.goto(f"{server}/rollouts/{filled.failed[0]}")  # served by the SPA fallback
    expect(page.get_by_test_id("rollout-title")).to_have_text(filled.failed[0])
    expect(page.get_by_test_id("attempt-error")).to_contain_text("cannot read a number")


def test_training_curves_grow_while_the_page_is_open(page: Any, server: str, filled: FilledStore) -> None:
    page.goto(server + "/training")
    expect(page.get_by_test_id("run-select")).to_have_value(RUN_ID)
    chart = page.locator("[data-testid=chart][data-key='reward/mean']")
    expect(chart).to_have_attribute("data-points", str(filled.metric_steps))
    for key in ("success_rate", "train/loss", "train/kl", "train/tokens_per_second"):
        expect(page.locator(f"[data-testid=chart][data-key='{key}']")).to_be_visible()
    expect(page.get_by_test_id("eval-row")).to_have_count((filled.metric_steps + 1) // 2)

    async def more() -> None:
        async with SqliteStore(filled.path) as store:
            await add_metric_steps(store, range(filled.metric_steps, filled.metric_steps + 2))

    run_async(more())
    filled.metric_steps += 2  # later tests see the grown run
    expect(chart).to_have_attribute("data-points", str(filled.metric_steps), timeout=10_000)
    expect(chart).to_contain_text(f"step {filled.metric_steps - 1}")


def test_resources_show_versions_and_the_prompt_diff(page: Any, server: str) -> None:
    page.goto(server + "/resources")
    expect(page.get_by_test_id("version-row")).to_have_count(2)
    detail = page.get_by_test_id("version-detail")
    expect(detail).to_contain_text("Version 2")  # newest first, selected by default
    expect(page.get_by_test_id("apo-info")).to_contain_text("ask for the number only")
    # the diff arrives in its own request, after the version's details: wait for its lines
    expect(page.get_by_test_id("diff-add").filter(has_text="+You are a careful calculator.")).to_have_count(1)
    expect(page.get_by_test_id("diff-del").first).to_have_text(re.compile(r"^-"))
    expect(page.get_by_test_id("prompt-template")).to_have_text(PROMPT_V2)
    page.locator("[data-testid=version-row][data-version='1']").click()
    expect(detail).to_contain_text("Version 1")
    assert re.search(r"version=1$", page.url)


def test_workers_show_heartbeat_age_and_current_rollout(page: Any, server: str, filled: FilledStore) -> None:
    page.goto(server + "/workers")
    live = page.locator(f"[data-testid=worker-row][data-worker-id='{LIVE_WORKER}']")
    expect(live).to_contain_text("runner")
    expect(live).to_contain_text(filled.claimed)
    expect(live).to_contain_text(re.compile(r"\d+(\.\d)? s ago"))
    expect(page.get_by_test_id("worker-row")).to_have_count(2)  # plus the run's runner, now offline
    live.get_by_role("link").click()
    expect(page.get_by_test_id("rollout-title")).to_have_text(filled.claimed)


def test_the_token_is_entered_once_and_kept(bare_page: Any, server: str, filled: FilledStore) -> None:
    page = bare_page
    page.goto(server + "/rollouts")
    expect(page.get_by_test_id("auth-needed")).to_be_visible()
    expect(page.get_by_test_id("health-badge")).to_have_attribute("data-health", "token needed")
    page.get_by_test_id("open-settings").click()
    page.get_by_test_id("settings-token").fill(TOKEN)
    page.get_by_test_id("settings-save").click()
    expect(page.locator(ROWS)).to_have_count(len(all_rollouts(filled)))
    page.reload()  # kept in localStorage
    expect(page.locator(ROWS)).to_have_count(len(all_rollouts(filled)))
    stored = page.evaluate("() => localStorage.getItem('agentbolt.dashboard.settings')")
    assert TOKEN in stored


def test_a_remote_server_url_with_cors(page: Any, server: str, filled: FilledStore) -> None:
    """The page from one server reads another one, started with cors_origins for it."""
    with serve_in_thread(SqliteStore(filled.path), admin_token=TOKEN, cors_origins=[server]) as remote:
        page.goto(server + "/rollouts")
        expect(page.locator(ROWS)).to_have_count(len(all_rollouts(filled)))
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.get_by_test_id("open-settings").click()
        page.get_by_test_id("settings-server-url").fill(remote + "/")
        page.get_by_test_id("settings-save").click()
        expect(page.locator(ROWS)).to_have_count(len(all_rollouts(filled)))
        page.wait_for_timeout(300)
        assert any(u.startswith(remote + "/v1/dashboard/") for u in requests), requests
