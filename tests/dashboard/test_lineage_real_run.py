"""The lineage and row-accounting pages on a real run, in a real headless browser: a short
GRPO run (``lineage_run.py``) whose rollouts talk to a tiny model through the gateway as a
coding harness does — a main agent, a sub-agent conversation in between, a context
compaction — shows, for one of its rollouts, the tree of samples GRPO merged from the
engine's token ids, and on the Training page what each step did with its rollouts. What
the pages must show is read from the run itself (its spans, its rollouts' rewards and
groups), not written down in advance."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip(
    "playwright.sync_api", reason="the dashboard browser tests need the 'playwright' package (pip install -e '.[dev]')"
)
from playwright.sync_api import expect

from agentbolt.adapters.lineage import MIN_DIVERGED_PREFIX, SUBAGENT_PREFIX
from agentbolt.metrics.rows import DROP_REASONS
from agentbolt.semconv import LLM_PROMPT_TOKEN_IDS, LLM_RESPONSE_TOKEN_IDS
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import Span
from dashboard.browser import missing_reason
from dashboard.conftest import TOKEN
from dashboard.filled_store import run_async
from dashboard.lineage_run import (
    CALLS,
    EXPLORER_SYSTEM,
    STEPS,
    StepRows,
    gateway_calls,
    run_lineage_grpo,
    step_rows,
)
from dashboard.test_lineage_pages import open_two_conversations


@dataclass(frozen=True)
class RealRun:
    url: str
    rollout_id: str
    """A rollout of step 1, the step that trained."""
    calls: dict[str, Span]
    rows: dict[int, StepRows]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealRun]:
    reason = missing_reason()
    if reason:  # before the run, not after: it takes seconds
        pytest.skip(f"dashboard browser tests need Playwright and Chromium: {reason}")
    path = tmp_path_factory.mktemp("lineage-real-run") / "store.db"

    async def fill() -> tuple[str, dict[str, Span], dict[int, StepRows]]:
        run = await run_lineage_grpo(path)
        assert run.steps == STEPS
        async with SqliteStore(path) as store:
            rows = await step_rows(store, STEPS)
            first = (await store.query_rollouts(limit=1000)).items
            rollout_id = next(r.rollout_id for r in first if r.metadata["group_seq"] == 0)
            return rollout_id, await gateway_calls(store, rollout_id), rows

    rollout_id, calls, rows = run_async(fill())
    with serve_in_thread(SqliteStore(path), admin_token=TOKEN) as url:
        yield RealRun(url, rollout_id, calls, rows)


def shared(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def tokens(span: Span, *, answer: bool = False) -> list[int]:
    ids = list(span.attributes[LLM_PROMPT_TOKEN_IDS])
    return ids + list(span.attributes[LLM_RESPONSE_TOKEN_IDS]) if answer else ids


def test_the_run_has_the_shape_of_a_harness_with_a_sub_agent_and_a_compaction(real_run: RealRun) -> None:
    """What the Samples tab must then show, from the engine's token ids alone."""
    m1, s1, s2, m2, m3 = (real_run.calls[c] for c in ("m1", "s1", "s2", "m2", "m3"))
    # the gateway builds a continuing turn from the earlier call's token ids: exact prefixes
    assert tokens(m2)[: len(tokens(m1, answer=True))] == tokens(m1, answer=True)
    assert tokens(s2)[: len(tokens(s1, answer=True))] == tokens(s1, answer=True)
    # the sub-agent shares no long prefix with the main agent; the compaction shares its system prompt
    assert shared(tokens(s1), tokens(m1)) < MIN_DIVERGED_PREFIX
    assert shared(tokens(m3), tokens(m2, answer=True)) >= MIN_DIVERGED_PREFIX


def test_a_real_rollout_s_samples_show_the_sub_agent_branch_and_the_compaction(page: Any, real_run: RealRun) -> None:
    span = {name: s.span_id for name, s in real_run.calls.items()}
    diverged_at = shared(tokens(real_run.calls["m3"]), tokens(real_run.calls["m2"], answer=True))
    explorer = SUBAGENT_PREFIX + hashlib.sha256(EXPLORER_SYSTEM.encode()).hexdigest()[:8]

    main, branch = open_two_conversations(page, f"{real_run.url}/rollouts/{real_run.rollout_id}")
    # the sub-agent, named after its own system prompt, is a branch of its own
    expect(branch).to_contain_text(f"Conversation 1: branch — {explorer}")
    expect(branch.get_by_test_id("lineage-cause")).to_have_text("new_conversation")
    expect(branch.get_by_test_id("lineage-call")).to_have_text([f"{span['s1']} trained", f"{span['s2']} trained"])
    # the main agent's turns 1 and 2 are one sample; the compacted history hangs under it
    first = main.locator("[data-testid=lineage-sample][data-cause=first]")
    expect(first).to_contain_text("Sample 0")
    expect(first.get_by_test_id("lineage-call")).to_have_text([f"{span['m1']} trained", f"{span['m2']} trained"])
    diverged = main.locator("li li [data-testid=lineage-sample][data-cause=diverged]")
    expect(diverged).to_contain_text("Sample 2")
    expect(diverged.get_by_test_id("lineage-call")).to_have_text([f"{span['m3']} trained", f"{span['m4']} trained"])
    expect(diverged.get_by_test_id("lineage-why")).to_contain_text(
        f"shares tokens 0–{diverged_at - 1} with sample 0, differs from token {diverged_at}")
    expect(page.locator("[data-testid=lineage-break]")).to_have_text(["1 new_conversation", "1 diverged"])
    # every call trains (the run had no agent_match) until agent_match picks the sub-agent;
    # the main agent's calls carry no name, and an unnamed call never matches
    expect(page.locator("[data-testid=lineage-call][data-trained=true]")).to_have_count(len(CALLS))
    page.get_by_test_id("lineage-agent-match").fill(f"^{SUBAGENT_PREFIX}")
    trained = page.locator("[data-testid=lineage-call][data-trained=true]")
    expect(trained).to_have_text([f"{span['s1']} trained", f"{span['s2']} trained"])
    expect(page.locator("[data-testid=lineage-call][data-trained=false]")).to_have_count(len(CALLS) - 2)


def test_the_training_page_says_what_each_real_step_did_with_its_rollouts(page: Any, real_run: RealRun) -> None:
    rows = real_run.rows
    assert any(r.trained for r in rows.values()), "no step trained: the graded groups tied"
    page.goto(real_run.url + "/training")
    steps = page.get_by_test_id("rows-step")
    expect(steps).to_have_count(STEPS)
    for step, expected in rows.items():
        row = page.locator(f"[data-testid=rows-step][data-step='{step}']")
        expect(row.get_by_test_id("rows-flow")).to_have_text(f"{expected.rows_in} → {expected.trained}")
        dropped = [f"{r} {expected.dropped[r]}" for r in DROP_REASONS if expected.dropped.get(r)]
        expect(row.get_by_test_id("rows-dropped")).to_have_text(dropped)
        why = row.get_by_test_id("why-nothing-trained")
        if expected.trained:
            expect(why).to_have_count(0)
        elif set(expected.dropped) == {"zero_variance"}:
            expect(why).to_have_text(f"Trained nothing: all {expected.equal_groups} groups had zero reward variance "
                                     f"({expected.dropped['zero_variance']} rollouts)")
        else:
            expect(why).to_contain_text(f"Trained nothing: none of {expected.rows_in} rollouts trained")
