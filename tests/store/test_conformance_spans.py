"""Conformance: spans are stored idempotently, ordered per attempt, paged, and reward
spans keep the attempt's and the rollout's reward up to date."""

from __future__ import annotations

import pytest

from agentbolt import semconv
from agentbolt.store.base import Store
from agentbolt.store.errors import NotFoundError
from agentbolt.types import AttemptStatus, RolloutConfig, Span, SpanEvent, SpanStatus

A = AttemptStatus


async def _attempt(store: Store, config: RolloutConfig | None = None) -> tuple[str, str]:
    """Enqueue and claim one rollout; returns (rollout_id, attempt_id)."""
    r = await store.enqueue_rollout("x", config=config)
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == r.rollout_id
    return r.rollout_id, claim.attempt.attempt_id


def _span(rid: str, aid: str, name: str = "step", **kw: object) -> Span:
    return Span(rollout_id=rid, attempt_id=aid, name=name, **kw)  # type: ignore[arg-type]


async def test_spans_get_sequence_ids_0_1_2_in_the_order_they_arrive(store: Store) -> None:
    rid, aid = await _attempt(store)

    one = [await store.add_span(_span(rid, aid, f"s{i}")) for i in range(3)]
    many = await store.add_spans([_span(rid, aid, f"s{i}") for i in range(3, 6)])

    assert [s.sequence_id for s in one + many] == [0, 1, 2, 3, 4, 5]
    stored = (await store.query_spans(rid, aid)).items
    assert [(s.name, s.sequence_id) for s in stored] == [(f"s{i}", i) for i in range(6)]


async def test_each_attempt_numbers_its_spans_from_zero(store: Store) -> None:
    rid, first = await _attempt(store, RolloutConfig(retry_on=[A.FAILED]))
    await store.add_spans([_span(rid, first), _span(rid, first)])
    await store.update_attempt(rid, first, status=A.FAILED)
    claim = await store.claim_rollout("w")
    assert claim is not None

    added = await store.add_spans([_span(rid, claim.attempt.attempt_id), _span(rid, claim.attempt.attempt_id)])

    assert [s.sequence_id for s in added] == [0, 1]


async def test_a_sequence_id_given_by_the_sender_is_kept_and_later_spans_follow_it(store: Store) -> None:
    rid, aid = await _attempt(store)

    given = await store.add_span(_span(rid, aid, "given", sequence_id=10))
    after = await store.add_span(_span(rid, aid, "after"))

    assert given.sequence_id == 10
    assert after.sequence_id == 11


async def test_a_span_sent_twice_is_stored_once(store: Store) -> None:
    rid, aid = await _attempt(store)
    span = _span(rid, aid, "llm.call", span_id="abc123")

    first = await store.add_span(span)
    again = await store.add_span(span)
    in_batch = await store.add_spans([span, _span(rid, aid, "other")])

    assert first.sequence_id == again.sequence_id == in_batch[0].sequence_id == 0
    stored = await store.get_spans(rid)
    assert [s.name for s in stored] == ["llm.call", "other"]
    assert (await store.stats()).total_spans == 2


async def test_the_same_span_id_in_two_attempts_is_two_spans(store: Store) -> None:
    rid, first = await _attempt(store, RolloutConfig(retry_on=[A.FAILED]))
    await store.add_span(_span(rid, first, span_id="same"))
    await store.update_attempt(rid, first, status=A.FAILED)
    claim = await store.claim_rollout("w")
    assert claim is not None

    await store.add_span(_span(rid, claim.attempt.attempt_id, span_id="same"))

    assert len(await store.get_spans(rid)) == 2


async def test_a_batch_with_a_span_for_an_unknown_attempt_stores_nothing(store: Store) -> None:
    rid, aid = await _attempt(store)
    batch = [_span(rid, aid, "ok-1"), _span(rid, aid, "ok-2"), _span(rid, "no-such-attempt", "bad")]

    with pytest.raises(NotFoundError):
        await store.add_spans(batch)

    assert await store.get_spans(rid) == []
    assert (await store.stats()).total_spans == 0


async def test_a_span_for_an_unknown_rollout_is_not_found(store: Store) -> None:
    _, aid = await _attempt(store)

    with pytest.raises(NotFoundError):
        await store.add_span(_span("no-such-rollout", aid))
    assert (await store.stats()).total_spans == 0


async def test_querying_spans_of_unknown_ids_is_not_found(store: Store) -> None:
    rid, _ = await _attempt(store)

    with pytest.raises(NotFoundError):
        await store.query_spans("no-such-rollout")
    with pytest.raises(NotFoundError):
        await store.query_spans(rid, "no-such-attempt")


async def test_spans_can_be_read_per_attempt_for_all_attempts_for_the_latest_and_by_name(store: Store) -> None:
    rid, first = await _attempt(store, RolloutConfig(retry_on=[A.FAILED]))
    await store.add_spans([_span(rid, first, "llm"), _span(rid, first, "tool")])
    await store.update_attempt(rid, first, status=A.FAILED)
    claim = await store.claim_rollout("w")
    assert claim is not None
    second = claim.attempt.attempt_id
    await store.add_spans([_span(rid, second, "llm"), _span(rid, second, "reward")])

    def shape(spans: list[Span]) -> list[tuple[str, int | None, str]]:
        return [(s.attempt_id, s.sequence_id, s.name) for s in spans]

    everything = (await store.query_spans(rid)).items
    assert shape(everything) == [(first, 0, "llm"), (first, 1, "tool"), (second, 0, "llm"), (second, 1, "reward")]
    assert shape((await store.query_spans(rid, first)).items) == [(first, 0, "llm"), (first, 1, "tool")]
    assert shape((await store.query_spans(rid, "latest")).items) == [(second, 0, "llm"), (second, 1, "reward")]
    assert shape((await store.query_spans(rid, name="llm")).items) == [(first, 0, "llm"), (second, 0, "llm")]
    assert shape((await store.query_spans(rid, second, name="llm")).items) == [(second, 0, "llm")]
    assert (await store.query_spans(rid, name="nothing")).items == []


async def test_the_latest_spans_of_a_never_claimed_rollout_are_empty(store: Store) -> None:
    r = await store.enqueue_rollout("x")

    page = await store.query_spans(r.rollout_id, "latest")

    assert page.items == []
    assert page.next_cursor is None


async def test_2500_spans_page_by_1000_each_exactly_once_in_order(store: Store) -> None:
    rid, aid = await _attempt(store)
    for start in range(0, 2500, 500):
        await store.add_spans([_span(rid, aid, f"s{i}") for i in range(start, start + 500)])

    pages: list[list[Span]] = []
    cursor: str | None = None
    while True:
        page = await store.query_spans(rid, limit=1000, cursor=cursor)
        pages.append(page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert [len(p) for p in pages] == [1000, 1000, 500]
    spans = [s for p in pages for s in p]
    assert [s.sequence_id for s in spans] == list(range(2500))
    assert [s.name for s in spans] == [f"s{i}" for i in range(2500)]
    assert len({s.span_id for s in spans}) == 2500
    assert (await store.stats()).total_spans == 2500


async def test_a_reward_span_sets_the_reward_of_the_attempt_and_the_rollout(store: Store) -> None:
    rid, aid = await _attempt(store)
    attrs = semconv.reward_span_attributes({"accuracy": 0.75, "length": -0.1}, primary="accuracy")

    await store.add_span(_span(rid, aid, semconv.REWARD_SPAN, attributes=attrs))

    assert (await store.get_attempt(rid, aid)).reward == 0.75
    assert (await store.get_rollout(rid)).reward == 0.75
    later = semconv.reward_span_attributes({"accuracy": 0.25}, primary="accuracy")
    await store.add_span(_span(rid, aid, semconv.REWARD_SPAN, attributes=later))
    assert (await store.get_attempt(rid, aid)).reward == 0.25
    assert (await store.get_rollout(rid)).reward == 0.25


async def test_spans_that_are_not_reward_spans_leave_the_reward_alone(store: Store) -> None:
    rid, aid = await _attempt(store)

    await store.add_span(_span(rid, aid, "llm", attributes={semconv.REWARD_VALUE: 1.0}))
    await store.add_span(_span(rid, aid, semconv.REWARD_SPAN, attributes={semconv.REWARD_VALUE: "high"}))

    assert (await store.get_attempt(rid, aid)).reward is None
    assert (await store.get_rollout(rid)).reward is None


async def test_a_new_attempt_does_not_inherit_the_previous_attempts_reward(store: Store) -> None:
    rid, first = await _attempt(store, RolloutConfig(retry_on=[A.FAILED]))
    attrs = semconv.reward_span_attributes({"reward": 1.0}, primary="reward")
    await store.add_span(_span(rid, first, semconv.REWARD_SPAN, attributes=attrs))
    await store.update_attempt(rid, first, status=A.FAILED)

    claim = await store.claim_rollout("w")

    assert claim is not None
    assert claim.rollout.reward is None
    assert (await store.get_rollout(rid)).reward is None
    assert (await store.get_attempt(rid, first)).reward == 1.0


async def test_span_fields_attributes_and_events_round_trip_intact(store: Store) -> None:
    rid, aid = await _attempt(store)
    span = Span(
        rollout_id=rid,
        attempt_id=aid,
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        parent_id="00f067aa0ba902b7",
        name="chat gpt-x",
        kind="client",
        status=SpanStatus.ERROR,
        status_message="rate limited — réessayez",
        start_time=1_700_000_000.125,
        end_time=1_700_000_001.5,
        attributes={
            "gen_ai.request.model": "qwen-0.5b",
            "gen_ai.usage.input_tokens": 12,
            "agentbolt.prompt_token_ids": [1, 2, 3, 151643],
            "agentbolt.logprobs": [-0.5, -1.25, 0.0],
            "big": 2**40,
            "flag": False,
            "nothing": None,
            "text": "汉字 / emoji 🎉 / quotes \" ' \\ / newline\n",
            "nested": {"messages": [{"role": "user", "content": "héllo"}], "empty": {}, "list": []},
        },
        events=[
            SpanEvent(name="exception", timestamp=1_700_000_000.5, attributes={"exception.message": "boom ✗"}),
            SpanEvent(name="tick", timestamp=1_700_000_000.75),
        ],
        resource={"service.name": "my-agent", "host": {"gpu": ["h100", "h100"]}},
    )

    await store.add_span(span)

    (stored,) = (await store.query_spans(rid, aid)).items
    assert stored == span.model_copy(update={"sequence_id": 0})
