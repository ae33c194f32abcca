"""Span building (same shape as traced calls, read by the adapters), the background
span writer (batches, retries a failing store, flushes on close) and stream reassembly."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.gateway.recording import CallRecord, SpanRecorder, build_span
from agentbolt.gateway.streaming import StreamAssembler
from agentbolt.store.errors import StoreUnavailableError
from agentbolt.store.memory import MemoryStore
from agentbolt.types import RolloutCreate, Span


def _record(rollout_id: str, attempt_id: str, i: int = 0) -> CallRecord:
    now = time.time()
    return CallRecord(
        rollout_id=rollout_id,
        attempt_id=attempt_id,
        request={"model": "m", "messages": [{"role": "user", "content": f"q{i}"}], "logprobs": True},
        response={
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "prompt_token_ids": [1, 2],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "a"},
                    "finish_reason": "stop",
                    "token_ids": [3],
                    "logprobs": {"content": [{"token": "a", "logprob": -0.1}]},
                }
            ],
        },
        status_code=200,
        engine="fake",
        replica=0,
        policy_version=3,
        start_time=now,
        end_time=now + 0.01,
        latency_ms=10.0,
    )


def test_the_adapters_read_gateway_spans_like_traced_calls() -> None:
    span = build_span(_record("r", "a"))
    (call,) = extract_model_calls([span])
    assert call.prompt_token_ids == [1, 2] and call.response_token_ids == [3]
    assert call.response_logprobs == [-0.1] and call.token_ids_source == "engine"
    assert call.messages == [{"role": "user", "content": "q0"}] and call.response_text == "a"
    assert "openinference.span.kind" not in span.attributes
    assert span.attributes["otel.scope.name"] == "agentbolt.gateway"


def test_the_span_is_written_from_the_record_with_the_answer_ids_stored_once() -> None:
    record = _record("r", "a")
    span = build_span(record)
    attrs = span.attributes
    assert json.loads(attrs["agentbolt.llm.request"]) == record.request
    response = json.loads(attrs["agentbolt.llm.response"])
    assert "token_ids" not in response["choices"][0]  # only in agentbolt.llm.response_token_ids
    assert attrs["agentbolt.llm.response_token_ids"] == [3]
    assert "logprobs" not in response["choices"][0]  # only in agentbolt.llm.response_logprobs
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.1]
    assert attrs["gen_ai.system"] == attrs["gen_ai.provider.name"] == attrs["agentbolt.llm.engine"] == "fake"
    assert span.name == "chat m" and attrs["agentbolt.llm.policy_version"] == 3


def test_the_logprobs_object_stays_in_the_response_when_the_request_asked_for_alternatives() -> None:
    record = _record("r", "a")
    alternatives = {"content": [{"token": "a", "logprob": -0.1, "top_logprobs": [{"token": "b", "logprob": -2.4}]}]}
    record.request["top_logprobs"] = 1
    record.response["choices"][0]["logprobs"] = alternatives  # type: ignore[index]
    attrs = build_span(record).attributes
    assert json.loads(attrs["agentbolt.llm.response"])["choices"][0]["logprobs"] == alternatives
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.1]


def test_completions_logprobs_are_stored_once_unless_alternatives_were_asked_for() -> None:
    record = _record("r", "a")
    lp = {"tokens": ["a"], "token_logprobs": [-0.1], "top_logprobs": [{"a": -0.1}], "text_offset": [0]}
    record.request = {"model": "m", "prompt": "q", "logprobs": 1}
    record.response = {"object": "text_completion", "model": "m",
                       "choices": [{"index": 0, "text": "a", "token_ids": [3], "logprobs": lp}]}
    attrs = build_span(record).attributes
    assert "logprobs" not in json.loads(attrs["agentbolt.llm.response"])["choices"][0]
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.1]
    record.request["logprobs"] = 5
    attrs = build_span(record).attributes
    assert json.loads(attrs["agentbolt.llm.response"])["choices"][0]["logprobs"] == lp


def test_logprobs_the_attribute_cannot_hold_stay_in_the_response() -> None:
    record = _record("r", "a")
    record.response["choices"][0]["logprobs"] = {"content": [{"token": "a", "logprob": None}]}  # type: ignore[index]
    attrs = build_span(record).attributes
    assert "agentbolt.llm.response_logprobs" not in attrs
    assert json.loads(attrs["agentbolt.llm.response"])["choices"][0]["logprobs"]["content"][0]["token"] == "a"


class FlakyStore(MemoryStore):
    """Refuses the first ``failures`` writes of spans; each write takes ``seconds`` (a store
    that fsyncs); keeps the size of each write it took."""

    def __init__(self, failures: int, seconds: float = 0.0) -> None:
        super().__init__()
        self.failures = failures
        self.seconds = seconds
        self.writes: list[int] = []

    async def add_spans(self, spans: Sequence[Span]) -> list[Span]:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailableError("store down")
        self.writes.append(len(spans))
        await asyncio.sleep(self.seconds)
        return await super().add_spans(spans)


async def _claimed(store: MemoryStore) -> tuple[str, str]:
    await store.enqueue_rollouts([RolloutCreate(rollout_id="r")])
    claim = await store.claim_rollout("w")
    assert claim is not None
    return claim.rollout.rollout_id, claim.attempt.attempt_id


async def test_spans_are_written_in_batches_and_survive_store_hiccups() -> None:
    store = FlakyStore(failures=2)
    rid, aid = await _claimed(store)
    recorder = SpanRecorder(store, batch_size=10, flush_interval=0.01)
    recorder.start()
    for i in range(25):
        recorder.add(_record(rid, aid, i))
    await asyncio.wait_for(recorder.flush(), 10)
    assert sum(store.writes) == 25 and max(store.writes) <= 10
    assert len(await store.get_spans(rid)) == 25
    await recorder.close()


async def test_calls_answered_during_a_write_wait_for_the_next_interval_not_a_write_of_their_own() -> None:
    store = FlakyStore(failures=0, seconds=0.1)
    rid, aid = await _claimed(store)
    recorder = SpanRecorder(store, batch_size=1000, flush_interval=0.5)
    recorder.start()
    recorder.add(_record(rid, aid, 0))
    while not store.writes:  # the first interval ends: its one span is being written
        await asyncio.sleep(0.01)
    for i in range(1, 6):
        recorder.add(_record(rid, aid, i))
    await asyncio.sleep(0.3)  # the write is done; the next interval is not over
    assert store.writes == [1]
    await asyncio.wait_for(recorder.flush(), 10)
    assert store.writes == [1, 5] and len(await store.get_spans(rid)) == 6
    await recorder.close()


async def test_close_writes_what_is_pending() -> None:
    store = FlakyStore(failures=0)
    rid, aid = await _claimed(store)
    recorder = SpanRecorder(store, batch_size=1000, flush_interval=60)
    recorder.start()
    for i in range(5):
        recorder.add(_record(rid, aid, i))
    await recorder.close()
    assert len(await store.get_spans(rid)) == 5


def test_streamed_tool_calls_are_reassembled() -> None:
    chunks = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "m",
            "prompt_token_ids": [5, 6],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}],
        },
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "add", "arguments": '{"a":'},
                            }
                        ]
                    },
                    "token_ids": [7],
                }
            ],
        },
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]},
                    "token_ids": [8],
                    "finish_reason": "tool_calls",
                }
            ],
        },
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 2, "completion_tokens": 2},
        },
    ]
    asm = StreamAssembler()
    for c in chunks:
        asm.add(c)
    out = asm.result()
    assert out["prompt_token_ids"] == [5, 6] and out["usage"]["completion_tokens"] == 2
    (choice,) = out["choices"]
    assert choice["token_ids"] == [7, 8] and choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    ]
