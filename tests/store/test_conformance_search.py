"""Conformance: searching and counting rollouts, the run-time sort keys (start_time,
end_time, duration, attempt_count) and the latest attempts of many rollouts — what the
dashboard's rollout table reads."""

from __future__ import annotations

from typing import Any

import pytest

from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError
from agentbolt.types import (
    AttemptStatus,
    Rollout,
    RolloutConfig,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
)

A = AttemptStatus
R = RolloutStatus
N = 36


async def _populate(store: Store) -> list[str]:
    """36 rollouts: ids whose order differs from enqueue order, inputs with mixed case,
    some finished (in varied times), some retried (2 attempts), some running, some
    queued. Returns the ids in enqueue order."""
    ids = [f"job-{(i * 7) % N:02d}" for i in range(N)]
    specs = [
        RolloutCreate(
            rollout_id=rid,
            input={"question": f"What is {i} + {i}?", "topic": "Geometry" if i % 4 == 0 else "algebra"},
            mode=RolloutMode.VAL if i % 3 == 1 else RolloutMode.TRAIN,
            config=RolloutConfig(max_attempts=2, retry_on=[A.FAILED]),
        )
        for i, rid in enumerate(ids)
    ]
    await store.enqueue_rollouts(specs)
    claims = [c for _ in range(24) for c in await store.claim_rollouts("w1")]  # one by one: varied start times
    for i, c in enumerate(claims):
        if i < 8:
            await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.SUCCEEDED)
        elif i < 14:
            await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.FAILED)  # requeued
        elif i < 18:
            await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.RUNNING)
    # the requeued ones go again (second attempts), three of them finish
    again = await store.claim_rollouts("w2", limit=6)
    assert all(c.attempt.sequence_id == 2 for c in again)
    for c in again[:3]:
        await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.SUCCEEDED)
    return ids


def _value(r: Rollout, sort_by: str) -> Any:
    if sort_by == "duration":
        return None if r.start_time is None or r.end_time is None else r.end_time - r.start_time
    return getattr(r, sort_by)


def _expected(rollouts: list[Rollout], sort_by: str) -> list[str]:
    def key(r: Rollout) -> tuple[Any, ...]:
        v = _value(r, sort_by)
        return (0, 0, r.rollout_id) if v is None else (1, v, r.rollout_id)

    return [r.rollout_id for r in sorted(rollouts, key=key)]


async def _walk(store: Store, limit: int, **query: Any) -> list[str]:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.query_rollouts(limit=limit, cursor=cursor, **query)
        seen.extend(r.rollout_id for r in page.items)
        if page.next_cursor is None:
            return seen
        assert len(page.items) == limit
        cursor = page.next_cursor


async def _everything(store: Store) -> list[Rollout]:
    return (await store.query_rollouts(limit=1000)).items


# ---------------------------------------------------------------------------- search
async def test_search_finds_a_substring_of_the_id_or_the_input_json_ignoring_case(store: Store) -> None:
    ids = await _populate(store)

    async def found(search: str, **kw: Any) -> set[str]:
        return {r.rollout_id for r in (await store.query_rollouts(search=search, limit=1000, **kw)).items}

    assert await found("JOB-0") == {rid for rid in ids if rid.startswith("job-0")}
    assert await found("geometry") == {ids[i] for i in range(N) if i % 4 == 0}, "input text, case ignored"
    assert await found("what is 7 + 7") == {ids[7]}
    assert await found('"topic":"algebra"') == {ids[i] for i in range(N) if i % 4}, "compact JSON text"
    assert await found("nothing like this") == set()
    assert await found("%") == await found("_") == await found("\\") == set(), "no wildcards: text is text"
    assert await found("geometry", mode=RolloutMode.VAL) == {ids[i] for i in range(N) if i % 4 == 0 and i % 3 == 1}
    succeeded = {r.rollout_id for r in await _everything(store) if r.status == R.SUCCEEDED}
    assert await found("", status=[R.SUCCEEDED]) == succeeded, "an empty search is no search"


async def test_search_pages_walk_every_match_once_in_sort_order(store: Store) -> None:
    ids = await _populate(store)
    geometry = [r for r in await _everything(store) if ids.index(r.rollout_id) % 4 == 0]
    by_id = sorted(r.rollout_id for r in geometry)
    assert await _walk(store, 2, search="GEOMETRY", sort_by="rollout_id") == by_id
    assert await _walk(store, 4, search="geometry", sort_by="rollout_id", descending=True) == by_id[::-1]


async def test_a_search_longer_than_200_characters_is_refused(store: Store) -> None:
    with pytest.raises(InvalidRequestError):
        await store.query_rollouts(search="x" * 201)
    with pytest.raises(InvalidRequestError):
        await store.count_rollouts(search="x" * 201)


# ---------------------------------------------------------------------------- count
async def test_count_matches_the_number_of_rollouts_every_filter_lists(store: Store) -> None:
    await _populate(store)
    everything = await _everything(store)
    assert await store.count_rollouts() == N
    for query in (
        {"status": [R.SUCCEEDED]},
        {"status": [R.QUEUING, R.REQUEUING]},
        {"mode": RolloutMode.VAL},
        {"search": "GEOMETRY"},
        {"status": [R.SUCCEEDED], "mode": RolloutMode.TRAIN, "search": "algebra"},
        {"search": "no such text"},
    ):
        listed = (await store.query_rollouts(limit=1000, **query)).items
        assert await store.count_rollouts(**query) == len(listed), query
    assert sum([await store.count_rollouts(status=[s]) for s in R]) == len(everything)


async def test_a_capped_count_stops_at_the_cap(store: Store) -> None:
    await _populate(store)
    assert await store.count_rollouts(cap=10) == 10
    assert await store.count_rollouts(cap=1000) == N
    assert await store.count_rollouts(search="geometry", cap=3) == 3
    with pytest.raises(InvalidRequestError):
        await store.count_rollouts(cap=0)


# ---------------------------------------------------------------------------- sort keys
@pytest.mark.parametrize("sort_by", ["start_time", "end_time", "duration", "attempt_count"])
async def test_pages_of_5_walk_every_rollout_once_by_run_time_keys(store: Store, sort_by: str) -> None:
    await _populate(store)
    expected = _expected(await _everything(store), sort_by)
    assert len({_value(r, sort_by) for r in await _everything(store)}) >= 3, "the keys must differ for a real check"

    assert await _walk(store, 5, sort_by=sort_by) == expected
    assert await _walk(store, 5, sort_by=sort_by, descending=True) == expected[::-1]


async def test_sorting_by_duration_with_a_status_filter_lists_finished_rollouts_longest_first(store: Store) -> None:
    await _populate(store)
    done = [r for r in await _everything(store) if r.status == R.SUCCEEDED]
    page = await store.query_rollouts(status=[R.SUCCEEDED], sort_by="duration", descending=True, limit=100)
    durations = [r.end_time - r.start_time for r in page.items]  # type: ignore[operator]
    assert len(page.items) == len(done) == 11
    assert durations == sorted(durations, reverse=True)


# ---------------------------------------------------------------------------- latest attempts
async def test_latest_attempts_of_many_rollouts_come_in_one_call(store: Store) -> None:
    ids = await _populate(store)
    everything = {r.rollout_id: r for r in await _everything(store)}
    latest = await store.get_latest_attempts([*ids, "no-such-rollout"])
    claimed = {rid for rid, r in everything.items() if r.latest_attempt_id is not None}
    assert set(latest) == claimed
    for rid, attempt in latest.items():
        assert attempt.attempt_id == everything[rid].latest_attempt_id
        assert attempt.worker_id == ("w2" if attempt.sequence_id == 2 else "w1")
    assert await store.get_latest_attempts([]) == {}
