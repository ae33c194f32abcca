"""Conformance: ``delete_spans`` — only spans of finished rollouts go, filtered by finish
time and/or ids; a dry run counts without deleting; rollouts, attempts and rewards stay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentbolt import semconv
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import retention as sqlite_retention
from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError, PermissionDeniedError
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import (
    AttemptStatus,
    RolloutConfig,
    RolloutCreate,
    RolloutStatus,
    Span,
)

A = AttemptStatus
FAR_FUTURE = 4_000_000_000.0


def _span(rid: str, aid: str, name: str = "step", **kw: object) -> Span:
    return Span(rollout_id=rid, attempt_id=aid, name=name, **kw)  # type: ignore[arg-type]


async def _finished(store: Store, n_spans: int = 3, *, outcome: AttemptStatus = A.SUCCEEDED) -> str:
    """A rollout with ``n_spans`` spans (the last a reward of 1.0) that ended with ``outcome``."""
    r = await store.enqueue_rollout("task")
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == r.rollout_id
    aid = claim.attempt.attempt_id
    spans = [_span(r.rollout_id, aid, f"s{i}") for i in range(n_spans - 1)]
    spans.append(_span(r.rollout_id, aid, semconv.REWARD_SPAN, attributes={semconv.REWARD_VALUE: 1.0}))
    await store.add_spans(spans)
    await store.update_attempt(r.rollout_id, aid, status=outcome)
    return r.rollout_id


async def _running(store: Store, n_spans: int = 2) -> str:
    """A claimed rollout, still running, with ``n_spans`` spans."""
    r = await store.enqueue_rollout("task")
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == r.rollout_id
    await store.add_spans([_span(r.rollout_id, claim.attempt.attempt_id) for _ in range(n_spans)])
    return r.rollout_id


async def _span_count(store: Store, rollout_id: str) -> int:
    return len(await store.get_spans(rollout_id))


async def test_spans_of_finished_rollouts_are_deleted_and_counted(store: Store) -> None:
    ok = await _finished(store, 3)
    failed = await _finished(store, 2, outcome=A.FAILED)

    deleted = await store.delete_spans(before=FAR_FUTURE)

    assert deleted == 5
    assert await _span_count(store, ok) == 0 and await _span_count(store, failed) == 0
    assert (await store.stats()).total_spans == 0


async def test_the_rollout_its_attempts_and_its_reward_stay(store: Store) -> None:
    rid = await _finished(store, 3)
    before = await store.get_rollout(rid)

    await store.delete_spans(rollout_ids=[rid])

    after = await store.get_rollout(rid)
    assert after == before
    assert after.reward == 1.0 and after.status == RolloutStatus.SUCCEEDED
    (attempt,) = await store.query_attempts(rid)
    assert attempt.reward == 1.0 and attempt.status == A.SUCCEEDED


async def test_spans_of_unfinished_rollouts_are_never_deleted(store: Store) -> None:
    running = await _running(store, 2)
    done = await _finished(store, 1)
    queued = (await store.enqueue_rollout("later")).rollout_id

    deleted = await store.delete_spans(before=FAR_FUTURE, rollout_ids=[running, queued, done])
    everything = await store.delete_spans(before=FAR_FUTURE)

    assert (deleted, everything) == (1, 0)
    assert await _span_count(store, running) == 2
    assert (await store.stats()).total_spans == 2


async def test_a_rollout_waiting_for_a_retry_keeps_its_spans(store: Store) -> None:
    r = await store.enqueue_rollout("task", config=RolloutConfig(retry_on=[A.FAILED]))
    claim = await store.claim_rollout("w")
    assert claim is not None
    await store.add_spans([_span(r.rollout_id, claim.attempt.attempt_id)])
    await store.update_attempt(r.rollout_id, claim.attempt.attempt_id, status=A.FAILED)
    assert (await store.get_rollout(r.rollout_id)).status == RolloutStatus.REQUEUING

    assert await store.delete_spans(before=FAR_FUTURE) == 0
    assert await _span_count(store, r.rollout_id) == 1


async def test_every_attempt_of_a_finished_rollout_loses_its_spans(store: Store) -> None:
    r = await store.enqueue_rollout("task", config=RolloutConfig(retry_on=[A.FAILED]))
    first = await store.claim_rollout("w")
    assert first is not None
    await store.add_spans([_span(r.rollout_id, first.attempt.attempt_id) for _ in range(2)])
    await store.update_attempt(r.rollout_id, first.attempt.attempt_id, status=A.FAILED)
    second = await store.claim_rollout("w")
    assert second is not None
    await store.add_spans([_span(r.rollout_id, second.attempt.attempt_id) for _ in range(3)])
    await store.update_attempt(r.rollout_id, second.attempt.attempt_id, status=A.SUCCEEDED)

    assert await store.delete_spans(rollout_ids=[r.rollout_id]) == 5
    assert await _span_count(store, r.rollout_id) == 0


async def test_before_keeps_rollouts_that_finished_at_or_after_it(store: Store) -> None:
    old = await _finished(store, 2)
    cut = (await store.get_rollout(old)).end_time
    assert cut is not None
    cut += 0.005
    await asyncio.sleep(0.03)
    new = await _finished(store, 3)
    assert (await store.get_rollout(new)).end_time >= cut  # type: ignore[operator]

    assert await store.delete_spans(before=cut) == 2
    assert await _span_count(store, old) == 0
    assert await _span_count(store, new) == 3


async def test_rollout_ids_limit_the_deletion_and_unknown_ids_are_skipped(store: Store) -> None:
    a = await _finished(store, 2)
    b = await _finished(store, 3)

    assert await store.delete_spans(rollout_ids=[b, "no-such-rollout"]) == 3
    assert await _span_count(store, a) == 2
    assert await store.delete_spans(rollout_ids=[]) == 0


async def test_before_and_rollout_ids_together_mean_both(store: Store) -> None:
    a = await _finished(store, 2)
    cut = (await store.get_rollout(a)).end_time + 0.005  # type: ignore[operator]
    await asyncio.sleep(0.03)
    b = await _finished(store, 3)

    assert await store.delete_spans(before=cut, rollout_ids=[b]) == 0
    assert await store.delete_spans(before=cut, rollout_ids=[a, b]) == 2
    assert await _span_count(store, b) == 3


async def test_a_dry_run_counts_and_deletes_nothing(store: Store) -> None:
    rid = await _finished(store, 4)
    await _running(store, 2)

    assert await store.delete_spans(before=FAR_FUTURE, dry_run=True) == 4
    assert await _span_count(store, rid) == 4
    assert (await store.stats()).total_spans == 6


async def test_deleting_again_deletes_nothing(store: Store) -> None:
    await _finished(store, 2)

    assert await store.delete_spans(before=FAR_FUTURE) == 2
    assert await store.delete_spans(before=FAR_FUTURE) == 0
    assert await store.delete_spans(before=FAR_FUTURE, dry_run=True) == 0


async def test_a_call_without_any_filter_is_refused(store: Store) -> None:
    await _finished(store, 1)

    with pytest.raises(InvalidRequestError, match="before"):
        await store.delete_spans()
    assert (await store.stats()).total_spans == 1


async def test_a_span_sent_after_the_deletion_is_stored_again(store: Store) -> None:
    r = await store.enqueue_rollout("task")
    claim = await store.claim_rollout("w")
    assert claim is not None
    late = _span(r.rollout_id, claim.attempt.attempt_id, "late", span_id="late-1")
    await store.add_span(late)
    await store.update_attempt(r.rollout_id, claim.attempt.attempt_id, status=A.SUCCEEDED)
    await store.delete_spans(rollout_ids=[r.rollout_id])

    await store.add_span(late)

    assert [s.span_id for s in await store.get_spans(r.rollout_id)] == ["late-1"]


async def test_many_spans_over_many_rollouts_all_go(store: Store) -> None:
    ids = [(await store.enqueue_rollout(i)).rollout_id for i in range(40)]
    claims = await store.claim_rollouts("w", limit=40)
    assert len(claims) == 40
    await store.add_spans([_span(c.rollout.rollout_id, c.attempt.attempt_id) for c in claims for _ in range(30)])
    for c in claims[:30]:
        await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.SUCCEEDED)

    assert await store.delete_spans(before=FAR_FUTURE, dry_run=True) == 900
    assert await store.delete_spans(before=FAR_FUTURE) == 900
    assert (await store.stats()).total_spans == 300
    assert await _span_count(store, ids[-1]) == 30


# ---------------------------------------------------------------- HTTP specifics
async def test_a_rollout_scoped_token_may_not_delete_spans() -> None:
    server_store = MemoryStore()
    with serve_in_thread(server_store, admin_token="retention-admin") as url:
        admin = HttpStore(url, token="retention-admin")
        rid = await _finished(admin, 2)
        await admin.enqueue_rollout("next")
        claim = await admin.claim_rollout("w")
        assert claim is not None and claim.token
        agent = HttpStore(url, token=claim.token, max_retries=0)
        try:
            with pytest.raises(PermissionDeniedError):
                await agent.delete_spans(before=FAR_FUTURE)
        finally:
            await agent.close()
            await admin.close()
    assert len(await server_store.get_spans(rid)) == 2


# ---------------------------------------------------------------- SQLite specifics
async def test_sqlite_deletes_in_small_chunks_and_vacuum_shrinks_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_retention, "DELETE_CHUNK", 7)  # many chunks, some splitting a rollout
    store = SqliteStore(tmp_path / "s.db")
    try:
        await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(12)])
        claims = await store.claim_rollouts("w", limit=12)
        payload = {"text": "x" * 2000}
        await store.add_spans(
            [_span(c.rollout.rollout_id, c.attempt.attempt_id, attributes=payload) for c in claims for _ in range(10)]
        )
        for c in claims[:9]:
            await store.update_attempt(c.rollout.rollout_id, c.attempt.attempt_id, status=A.SUCCEEDED)
        await store.close()  # checkpoints the write-ahead log into the file
        size_before = (tmp_path / "s.db").stat().st_size

        assert await store.delete_spans(before=FAR_FUTURE) == 90
        await store.vacuum()

        assert (await store.stats()).total_spans == 30
        assert (tmp_path / "s.db").stat().st_size < size_before
    finally:
        await store.close()
