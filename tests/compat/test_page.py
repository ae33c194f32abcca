"""v0.3's query result (``PaginatedResult``) is a sequence of its items and keeps its
cursor; agentbolt's ``Page`` is a page (its ``items``, its cursor); the v0.3 store API
returns every match (it pages internally)."""

from __future__ import annotations

import agentbolt as agl
from agentbolt.compat.types import PaginatedResult
from agentbolt.types import Page, Span


def test_a_v03_page_iterates_over_its_items_and_keeps_its_cursor() -> None:
    page = PaginatedResult[int](items=[3, 1, 2], next_cursor="c1")
    assert list(page) == [3, 1, 2]
    assert len(page) == 3 and page[0] == 3 and page[-1] == 2 and page[1:] == [1, 2]
    assert 1 in page and 7 not in page
    assert page.next_cursor == "c1"
    assert not PaginatedResult[int](items=[])
    assert PaginatedResult[int].model_validate(page.model_dump()) == page
    assert isinstance(page, Page) and list(PaginatedResult.of(Page[int](items=[4], next_cursor="c2"))) == [4]


async def test_a_page_of_query_spans_holds_spans_and_a_cursor() -> None:
    store = agl.MemoryStore()
    rollout = await store.enqueue_rollout("task")
    claim = await store.claim_rollout()
    assert claim is not None
    await store.add_spans([Span(rollout_id=rollout.rollout_id, attempt_id=claim.attempt.attempt_id, name=f"s{i}")
                           for i in range(3)])
    page = await store.query_spans(rollout.rollout_id, limit=2)
    assert [s.name for s in page.items] == ["s0", "s1"] and page.next_cursor is not None
    rest = await store.query_spans(rollout.rollout_id, cursor=page.next_cursor)
    assert [s.name for s in rest.items] == ["s2"] and rest.next_cursor is None


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
