"""A query result (``Page``) is a sequence of its items and keeps its cursor; the v0.3
store API returns every match (it pages internally)."""

from __future__ import annotations

import agentbolt as agl
from agentbolt.types import Page, Span


def test_a_page_iterates_over_its_items_and_keeps_its_cursor() -> None:
    page = Page[int](items=[3, 1, 2], next_cursor="c1")
    assert list(page) == [3, 1, 2]
    assert len(page) == 3 and page[0] == 3 and page[-1] == 2 and page[1:] == [1, 2]
    assert 1 in page and 7 not in page
    assert page.next_cursor == "c1"
    assert not Page[int](items=[])
    assert Page[int].model_validate(page.model_dump()) == page


async def test_iterating_query_spans_yields_spans_not_field_tuples() -> None:
    store = agl.MemoryStore()
    rollout = await store.enqueue_rollout("task")
    claim = await store.claim_rollout()
    assert claim is not None
    await store.add_spans([Span(rollout_id=rollout.rollout_id, attempt_id=claim.attempt.attempt_id, name=f"s{i}")
                           for i in range(3)])
    page = await store.query_spans(rollout.rollout_id, limit=2)
    assert [s.name for s in page] == ["s0", "s1"] and page.next_cursor is not None
    rest = await store.query_spans(rollout.rollout_id, cursor=page.next_cursor)
    assert [s.name for s in rest] == ["s2"] and rest.next_cursor is None


async def test_the_v03_store_returns_every_span_past_a_page() -> None:
    store = agl.InMemoryLightningStore()
    started = await store.start_rollout(input="big")
    spans = [Span(rollout_id=started.rollout_id, attempt_id=started.attempt.attempt_id, name=f"s{i}")
             for i in range(1200)]
    await store.add_many_spans(spans)
    found = await store.query_spans(started.rollout_id)
    assert isinstance(found, list) and len(found) == 1200
    assert [s.name for s in found[:2]] == ["s0", "s1"]
    assert [s.name for s in await store.query_spans(started.rollout_id, name_contains="s119")] == [
        "s119", *[f"s119{i}" for i in range(10)]]
    assert len(await store.query_spans(started.rollout_id, limit=5, offset=1195)) == 5
