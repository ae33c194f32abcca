"""Conformance: querying rollouts (filters, sort keys, keyset pages) and the versioned
resources registry."""

from __future__ import annotations

from typing import Any

import pytest

from agentbolt import semconv
from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError, NotFoundError
from agentbolt.types import (
    LLM,
    AttemptStatus,
    JsonResource,
    PromptTemplate,
    Rollout,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
)

A = AttemptStatus
R = RolloutStatus
MODES = [RolloutMode.TRAIN, RolloutMode.VAL, RolloutMode.TEST]
N = 250


async def _populate(store: Store) -> list[str]:
    """250 rollouts in a known mix of statuses, modes and rewards; returns their ids in
    enqueue order. Ids are chosen so that id order differs from enqueue order, and
    rewards repeat so that ties must be broken by id."""
    ids = [f"r-{(i * 37) % N:03d}" for i in range(N)]
    for start in range(0, N, 25):
        await store.enqueue_rollouts(
            [RolloutCreate(rollout_id=ids[i], input=i, mode=MODES[i % 3]) for i in range(start, start + 25)]
        )
    claims = await store.claim_rollouts("w", limit=40)  # the first 40, in queue order
    assert [c.rollout.rollout_id for c in claims] == ids[:40]
    await store.add_spans(
        [
            Span(
                rollout_id=c.rollout.rollout_id,
                attempt_id=c.attempt.attempt_id,
                name=semconv.REWARD_SPAN,
                attributes=semconv.reward_span_attributes({"reward": (i % 5) / 4}, primary="reward"),
            )
            for i, c in enumerate(claims[:30])
        ]
    )
    for i, c in enumerate(claims):
        if i < 20:
            await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.SUCCEEDED)
        elif i < 30:
            await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.FAILED)
        elif i < 35:
            await store.heartbeat(c.rollout.rollout_id, c.attempt.attempt_id)
    for i in range(200, 210):
        await store.cancel_rollout(ids[i])
    return ids


async def _all_rollouts(store: Store, ids: list[str]) -> list[Rollout]:
    return [await store.get_rollout(rid) for rid in ids]


def _expected_order(rollouts: list[Rollout], enqueue_index: dict[str, int], sort_by: str) -> list[str]:
    """Ascending order by the spec: missing values first, ties broken by rollout id
    (and, for created_at, by enqueue order first)."""

    def key(r: Rollout) -> tuple[Any, ...]:
        if sort_by == "created_at":
            return (r.created_at, enqueue_index[r.rollout_id])
        value = getattr(r, sort_by)
        return (0, 0, r.rollout_id) if value is None else (1, value, r.rollout_id)

    return [r.rollout_id for r in sorted(rollouts, key=key)]


async def _page_through(store: Store, limit: int, **query: Any) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.query_rollouts(limit=limit, cursor=cursor, **query)
        assert len(page.items) <= limit
        seen.extend(r.rollout_id for r in page.items)
        if page.next_cursor is None:
            return seen
        assert len(page.items) == limit, "only the last page may be short"
        cursor = page.next_cursor


# ---------------------------------------------------------------------------- filters
async def test_rollouts_can_be_filtered_by_status_mode_and_id(store: Store) -> None:
    ids = await _populate(store)
    rollouts = {r.rollout_id: r for r in await _all_rollouts(store, ids)}

    async def query(**kw: Any) -> set[str]:
        return {r.rollout_id for r in (await store.query_rollouts(limit=1000, **kw)).items}

    def expect(pred: Any) -> set[str]:
        return {rid for rid, r in rollouts.items() if pred(r)}

    assert await query() == set(ids)
    assert await query(status=[R.SUCCEEDED]) == set(ids[:20])
    assert await query(status=[R.SUCCEEDED, R.FAILED]) == set(ids[:30])
    assert await query(status=[R.RUNNING]) == set(ids[30:35])
    assert await query(status=[R.PREPARING]) == set(ids[35:40])
    assert await query(status=[R.CANCELLED]) == set(ids[200:210])
    assert await query(status=[R.QUEUING]) == set(ids[40:200] + ids[210:])
    assert await query(mode=RolloutMode.VAL) == expect(lambda r: r.mode == RolloutMode.VAL) == set(ids[1::3])
    assert await query(status=[R.FAILED], mode=RolloutMode.TEST) == {ids[i] for i in range(20, 30) if i % 3 == 2}
    some = [ids[0], ids[25], ids[100], ids[205]]
    assert await query(rollout_ids=some) == set(some)
    assert await query(rollout_ids=some + ["no-such-rollout"]) == set(some)
    assert await query(rollout_ids=some, status=[R.QUEUING]) == {ids[100]}
    assert await query(rollout_ids=[]) == set()


@pytest.mark.parametrize("sort_by", ["created_at", "updated_at", "rollout_id", "reward"])
async def test_pages_of_7_return_every_rollout_once_in_order_for_each_sort_key(store: Store, sort_by: str) -> None:
    ids = await _populate(store)
    index = {rid: i for i, rid in enumerate(ids)}
    expected = _expected_order(await _all_rollouts(store, ids), index, sort_by)

    ascending = await _page_through(store, 7, sort_by=sort_by)
    descending = await _page_through(store, 7, sort_by=sort_by, descending=True)

    assert ascending == expected
    assert descending == expected[::-1]


async def test_filtered_pages_return_every_match_once_in_order(store: Store) -> None:
    ids = await _populate(store)
    rollouts = await _all_rollouts(store, ids)
    index = {rid: i for i, rid in enumerate(ids)}
    statuses = [R.QUEUING, R.SUCCEEDED, R.CANCELLED]
    matching = [r for r in rollouts if r.status in statuses and r.mode == RolloutMode.TRAIN]

    by_reward = await _page_through(store, 7, status=statuses, mode=RolloutMode.TRAIN, sort_by="reward", descending=True)
    by_created = await _page_through(store, 7, status=statuses, mode=RolloutMode.TRAIN)

    assert by_reward == _expected_order(matching, index, "reward")[::-1]
    assert by_created == _expected_order(matching, index, "created_at")
    assert len(by_created) == len(matching) > 7


async def test_the_default_order_is_enqueue_order(store: Store) -> None:
    first = await store.enqueue_rollouts([RolloutCreate(input=i, rollout_id=f"z{i}") for i in range(3)])
    second = await store.enqueue_rollouts([RolloutCreate(input=i, rollout_id=f"a{i}") for i in range(3)])

    page = await store.query_rollouts()

    assert [r.rollout_id for r in page.items] == [r.rollout_id for r in first + second]
    assert page.next_cursor is None


@pytest.mark.parametrize(
    "bad",
    [
        {"cursor": "not-a-cursor"},
        {"sort_by": "input"},
        {"sort_by": "status; DROP TABLE rollouts"},
        {"limit": 0},
        {"limit": -5},
        {"limit": 100_000},
    ],
    ids=["cursor", "sort-key", "sort-injection", "limit-0", "limit-negative", "limit-huge"],
)
async def test_invalid_rollout_queries_are_rejected(store: Store, bad: dict[str, Any]) -> None:
    await store.enqueue_rollout("x")

    with pytest.raises(InvalidRequestError):
        await store.query_rollouts(**bad)


async def test_invalid_span_queries_are_rejected(store: Store) -> None:
    r = await store.enqueue_rollout("x")

    with pytest.raises(InvalidRequestError):
        await store.query_spans(r.rollout_id, cursor="not-a-cursor")
    with pytest.raises(InvalidRequestError):
        await store.query_spans(r.rollout_id, limit=0)


# ---------------------------------------------------------------------------- resources
def _bundle(n: int) -> dict[str, Any]:
    return {"cfg": JsonResource(value={"n": n})}


async def test_there_are_no_resources_until_some_are_added(store: Store) -> None:
    assert await store.get_latest_resources() is None
    page = await store.query_resources()
    assert page.items == [] and page.next_cursor is None
    assert (await store.stats()).latest_resources_version is None


async def test_resource_versions_count_up_from_one(store: Store) -> None:
    v1 = await store.add_resources(_bundle(1), metadata={"step": 0})
    v2 = await store.add_resources(_bundle(2))
    v3 = await store.add_resources(_bundle(3))

    assert [v1.version, v2.version, v3.version] == [1, 2, 3]
    assert v1.metadata == {"step": 0}
    assert await store.get_resources(2) == v2
    assert await store.get_latest_resources() == v3
    assert (await store.stats()).latest_resources_version == 3


async def test_unknown_resource_versions_are_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.get_resources(1)
    await store.add_resources(_bundle(1))
    with pytest.raises(NotFoundError):
        await store.get_resources(2)


async def test_update_resources_replaces_named_entries_of_the_latest_version(store: Store) -> None:
    llm = LLM(endpoint="http://127.0.0.1:8000/v1", model="policy")
    await store.add_resources({"llm": llm, "prompt": PromptTemplate(template="Q: {q}")})

    updated = await store.update_resources({"prompt": PromptTemplate(template="Question: {q}\nA:")})

    assert updated.version == 2
    assert updated.resources == {"llm": llm, "prompt": PromptTemplate(template="Question: {q}\nA:")}
    assert (await store.get_resources(1)).resources["prompt"] == PromptTemplate(template="Q: {q}")


async def test_update_resources_on_an_empty_store_publishes_version_one(store: Store) -> None:
    updated = await store.update_resources(_bundle(7))

    assert updated.version == 1
    assert updated.resources == _bundle(7)


async def test_resource_versions_are_listed_newest_first_in_pages(store: Store) -> None:
    for n in range(1, 6):
        await store.add_resources(_bundle(n))

    versions: list[list[int]] = []
    cursor: str | None = None
    while True:
        page = await store.query_resources(limit=2, cursor=cursor)
        versions.append([r.version for r in page.items])
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert versions == [[5, 4], [3, 2], [1]]


async def test_every_resource_kind_round_trips(store: Store) -> None:
    bundle: dict[str, Any] = {
        "llm": LLM(
            endpoint="http://127.0.0.1:8000/v1",
            model="Qwen/Qwen2.5-0.5B-Instruct",
            api_key="sk-local",
            sampling_parameters={"temperature": 0.7, "top_p": 0.95, "stop": ["\n\n", "</answer>"]},
        ),
        "prompt": PromptTemplate(template="Réponds à {question} — en {language}."),
        "extra": JsonResource(value={"tools": [{"name": "search", "args": {"k": 5}}], "flag": True, "x": None}),
    }

    added = await store.add_resources(bundle)
    got = await store.get_resources(added.version)

    assert got.resources == bundle
    assert isinstance(got.resources["llm"], LLM)
    assert isinstance(got.resources["prompt"], PromptTemplate)
    assert isinstance(got.resources["extra"], JsonResource)
    assert got.resources["prompt"].format(question="2+2", language="français") == "Réponds à 2+2 — en français."
