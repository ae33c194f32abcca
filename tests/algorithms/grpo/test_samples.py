"""Exact-prefix merging of one rollout's model calls into training samples."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentbolt.adapters import MissingTokenIdsError, extract_model_calls
from agentbolt.algorithms.grpo import build_samples, samples_from_spans
from agentbolt.types import Span, SpanStatus


def call(
    span_id: str, prompt: list[int], response: list[int], logprobs: list[float] | None = None, *,
    version: int | None = None, t: float = 0.0, rollout: str = "ro-1", token_ids: bool = True,
    failed: bool = False,
) -> Span:
    """A model-call span as the gateway records it (token ids, logprobs, policy version)."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "agentbolt.llm.request": json.dumps({"model": "m", "messages": [{"role": "user", "content": "q"}]}),
        "agentbolt.llm.response": json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}]}),
        "agentbolt.llm.token_ids_source": "engine" if token_ids else "none",
    }
    if token_ids:
        attrs["agentbolt.llm.prompt_token_ids"] = prompt
        attrs["agentbolt.llm.response_token_ids"] = response
        attrs["agentbolt.llm.response_logprobs"] = logprobs if logprobs is not None else [-1.0] * len(response)
    if version is not None:
        attrs["agentbolt.llm.policy_version"] = version
    return Span(
        rollout_id=rollout, attempt_id="at-1", sequence_id=int(t), trace_id="t" * 32, span_id=span_id,
        parent_id=None, name="chat m", start_time=1000.0 + t, end_time=1000.5 + t, attributes=attrs,
        status=SpanStatus.ERROR if failed else SpanStatus.UNSET,
    )


def test_continuous_calls_merge_and_the_tokens_between_them_are_masked() -> None:
    # call 1: prompt [1 2 3]              → response [4 5]      (logprobs -0.1 -0.2, version 7)
    # call 2: prompt [1 2 3 4 5 | 6 7]    → response [8]        (logprob -0.3, version 8)
    #   [6 7] is the tool output between the calls: context, mask 0.
    spans = [
        call("c1", [1, 2, 3], [4, 5], [-0.1, -0.2], version=7, t=0),
        call("c2", [1, 2, 3, 4, 5, 6, 7], [8], [-0.3], version=8, t=1),
    ]
    (rs,) = samples_from_spans(spans)

    (s,) = rs.samples
    assert s.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert s.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert s.logprobs == [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.3]
    assert s.versions == [None, None, None, 7, 7, None, None, 8]
    assert s.span_ids == ["c1", "c2"]
    assert s.num_response_tokens == 3 and s.oldest_version == 7
    assert (rs.num_calls, rs.merge_misses, rs.merge_rate) == (2, 0, 1.0)


def test_a_re_rendered_earlier_turn_breaks_the_merge_and_starts_a_new_sample() -> None:
    # call 2's prompt renders call 1's answer [4 5] as [4 9]: not an exact prefix → new sample.
    # call 3 continues call 2 exactly → merges into sample 2.
    spans = [
        call("c1", [1, 2, 3], [4, 5], t=0),
        call("c2", [1, 2, 3, 4, 9, 6], [7], t=1),
        call("c3", [1, 2, 3, 4, 9, 6, 7, 10], [11], t=2),
    ]
    (rs,) = samples_from_spans(spans)

    first, second = rs.samples
    assert first.token_ids == [1, 2, 3, 4, 5] and first.loss_mask == [0, 0, 0, 1, 1]
    # sample 2: the whole re-rendered prompt is context; 7 and 11 are trained, 10 is not.
    assert second.token_ids == [1, 2, 3, 4, 9, 6, 7, 10, 11]
    assert second.loss_mask == [0, 0, 0, 0, 0, 0, 1, 0, 1]
    assert second.span_ids == ["c2", "c3"]
    # 3 calls → 2 follow-ups, 1 missed: merge rate 1 - 1/2 = 0.5
    assert (rs.num_calls, rs.merge_misses, rs.merge_rate) == (3, 1, 0.5)


def test_a_shorter_prompt_never_merges() -> None:
    # a fresh sub-agent prompt [1 2] is shorter than the sample [1 2 3 4]: new sample.
    rs = build_samples(extract_model_calls([call("c1", [1, 2, 3], [4], t=0), call("c2", [1, 2], [5], t=1)]))
    assert [s.token_ids for s in rs.samples] == [[1, 2, 3, 4], [1, 2, 5]]
    assert rs.merge_misses == 1


def test_failed_calls_are_skipped_and_do_not_count_as_misses() -> None:
    spans = [call("c1", [1], [2], t=0), call("bad", [9], [], t=1, failed=True), call("c2", [1, 2, 3], [4], t=2)]
    (rs,) = samples_from_spans(spans)
    (s,) = rs.samples
    assert s.token_ids == [1, 2, 3, 4] and s.loss_mask == [0, 1, 0, 1]
    assert (rs.num_calls, rs.merge_misses) == (2, 0)


def test_each_attempt_gets_its_own_samples() -> None:
    spans = [call("a", [1], [2], t=0, rollout="ro-1"), call("b", [1], [3], t=0, rollout="ro-2")]
    out = samples_from_spans(spans)
    assert [(rs.rollout_id, rs.samples[0].token_ids) for rs in out] == [("ro-1", [1, 2]), ("ro-2", [1, 3])]


def test_calls_without_token_ids_are_refused_not_retokenized() -> None:
    spans = [call("c1", [1], [2], t=0), call("c2", [], [], t=1, token_ids=False)]
    with pytest.raises(MissingTokenIdsError, match="1 of 2 model calls.*does not retokenize"):
        samples_from_spans(spans)


def test_calls_without_logprobs_are_refused() -> None:
    span = call("c1", [1], [2, 3], t=0)
    del span.attributes["agentbolt.llm.response_logprobs"]
    with pytest.raises(MissingTokenIdsError, match="logprob"):
        samples_from_spans([span])


def test_an_attempt_without_successful_calls_is_an_error() -> None:
    with pytest.raises(ValueError, match="no successful model calls"):
        build_samples([])
