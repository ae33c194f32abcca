"""SampleAdapter, the RL adapter: exact-prefix merging of one attempt's model calls into
training samples, the rollout's reward, and agent_match masking other agents' tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentbolt import semconv
from agentbolt.adapters import MissingTokenIdsError, extract_model_calls
from agentbolt.adapters.samples import (
    SampleAdapter,
    SampleCall,
    agent_counts,
    build_samples,
)
from agentbolt.types import Span, SpanStatus


def call(
    span_id: str, prompt: list[int], response: list[int], logprobs: list[float] | None = None, *,
    version: int | None = None, t: float = 0.0, rollout: str = "ro-1", token_ids: bool = True,
    failed: bool = False, agent: str | None = None,
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
    if agent is not None:
        attrs["agentbolt.agent.name"] = agent
    return Span(
        rollout_id=rollout, attempt_id="at-1", sequence_id=int(t), trace_id="t" * 32, span_id=span_id,
        parent_id=None, name="chat m", start_time=1000.0 + t, end_time=1000.5 + t, attributes=attrs,
        status=SpanStatus.ERROR if failed else SpanStatus.UNSET,
    )


def reward(value: float, t: float, rollout: str = "ro-1") -> Span:
    return Span(rollout_id=rollout, attempt_id="at-1", sequence_id=int(t), span_id=f"rw{int(t)}",
                name=semconv.REWARD_SPAN, start_time=1000.0 + t,
                attributes=semconv.reward_span_attributes({"reward": value}, "reward"))


def test_continuous_calls_merge_and_the_tokens_between_them_are_masked() -> None:
    # call 1: prompt [1 2 3]              → response [4 5]      (logprobs -0.1 -0.2, version 7)
    # call 2: prompt [1 2 3 4 5 | 6 7]    → response [8]        (logprob -0.3, version 8)
    #   [6 7] is the tool output between the calls: context, mask 0.
    spans = [
        call("c1", [1, 2, 3], [4, 5], [-0.1, -0.2], version=7, t=0),
        call("c2", [1, 2, 3, 4, 5, 6, 7], [8], [-0.3], version=8, t=1),
        reward(0.25, t=2),
    ]
    (rs,) = SampleAdapter().adapt(spans)

    (s,) = rs.samples
    assert s.token_ids == [1, 2, 3, 4, 5, 6, 7, 8]
    assert s.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1]
    assert s.logprobs == [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.3]
    assert s.versions == [None, None, None, 7, 7, None, None, 8]
    assert s.span_ids == ["c1", "c2"]
    assert s.calls == (SampleCall("c1", None, 3, 2, True), SampleCall("c2", None, 7, 1, True))
    assert s.num_response_tokens == 3 and s.oldest_version == 7
    assert (rs.num_calls, rs.merge_misses, rs.merge_rate) == (2, 0, 1.0)
    assert rs.reward == s.reward == 0.25  # the rollout's reward, on every sample
    assert SampleAdapter()(spans) == [s]


def test_a_re_rendered_earlier_turn_breaks_the_merge_and_starts_a_new_sample() -> None:
    # call 2's prompt renders call 1's answer [4 5] as [4 9]: not an exact prefix → new sample.
    # call 3 continues call 2 exactly → merges into sample 2.
    spans = [
        call("c1", [1, 2, 3], [4, 5], t=0),
        call("c2", [1, 2, 3, 4, 9, 6], [7], t=1),
        call("c3", [1, 2, 3, 4, 9, 6, 7, 10], [11], t=2),
    ]
    (rs,) = SampleAdapter().adapt(spans)

    first, second = rs.samples
    assert first.token_ids == [1, 2, 3, 4, 5] and first.loss_mask == [0, 0, 0, 1, 1]
    # sample 2: the whole re-rendered prompt is context; 7 and 11 are trained, 10 is not.
    assert second.token_ids == [1, 2, 3, 4, 9, 6, 7, 10, 11]
    assert second.loss_mask == [0, 0, 0, 0, 0, 0, 1, 0, 1]
    assert second.span_ids == ["c2", "c3"]
    # 3 calls → 2 follow-ups, 1 missed: merge rate 1 - 1/2 = 0.5
    assert (rs.num_calls, rs.merge_misses, rs.merge_rate) == (3, 1, 0.5)
    assert rs.reward is None  # no reward span


def test_a_shorter_prompt_never_merges() -> None:
    # a fresh sub-agent prompt [1 2] is shorter than the sample [1 2 3 4]: new sample.
    rs = build_samples(extract_model_calls([call("c1", [1, 2, 3], [4], t=0), call("c2", [1, 2], [5], t=1)]))
    assert rs is not None
    assert [s.token_ids for s in rs.samples] == [[1, 2, 3, 4], [1, 2, 5]]
    assert rs.merge_misses == 1


def test_failed_calls_are_skipped_and_do_not_count_as_misses() -> None:
    spans = [call("c1", [1], [2], t=0), call("bad", [9], [], t=1, failed=True), call("c2", [1, 2, 3], [4], t=2)]
    (rs,) = SampleAdapter().adapt(spans)
    (s,) = rs.samples
    assert s.token_ids == [1, 2, 3, 4] and s.loss_mask == [0, 1, 0, 1]
    assert (rs.num_calls, rs.merge_misses) == (2, 0)


def test_each_attempt_gets_its_own_samples() -> None:
    spans = [call("a", [1], [2], t=0, rollout="ro-1"), call("b", [1], [3], t=0, rollout="ro-2")]
    out = SampleAdapter().adapt(spans)
    assert [(rs.rollout_id, rs.samples[0].token_ids) for rs in out] == [("ro-1", [1, 2]), ("ro-2", [1, 3])]


def test_calls_without_token_ids_are_refused_not_retokenized() -> None:
    spans = [call("c1", [1], [2], t=0), call("c2", [], [], t=1, token_ids=False)]
    with pytest.raises(MissingTokenIdsError, match="1 of 2 trained model calls.*does not retokenize"):
        SampleAdapter().adapt(spans)


def test_calls_without_logprobs_are_refused() -> None:
    span = call("c1", [1], [2, 3], t=0)
    del span.attributes["agentbolt.llm.response_logprobs"]
    with pytest.raises(MissingTokenIdsError, match="logprob"):
        SampleAdapter().adapt([span])


def test_an_attempt_without_successful_calls_has_no_samples() -> None:
    assert build_samples([]) is None
    assert SampleAdapter().adapt([call("bad", [1], [], failed=True), reward(1.0, t=1)]) == []


def test_agent_match_trains_the_matched_agent_and_keeps_the_others_as_context() -> None:
    # planner: prompt [1 2]           → [3 4]   (context: not matched)
    # solver:  prompt [1 2 3 4 | 5]   → [6 7]   (trained), continues the planner's conversation
    # planner: prompt [9]             → [8]     (a fresh conversation of the planner only: no sample)
    spans = [
        call("p1", [1, 2], [3, 4], [-0.5, -0.6], version=3, t=0, agent="planner"),
        call("s1", [1, 2, 3, 4, 5], [6, 7], [-0.1, -0.2], version=3, t=1, agent="solver"),
        call("p2", [9], [8], t=2, agent="planner"),
        reward(1.0, t=3),
    ]
    (rs,) = SampleAdapter(agent_match="^solver$").adapt(spans)

    (s,) = rs.samples
    assert s.token_ids == [1, 2, 3, 4, 5, 6, 7]
    assert s.loss_mask == [0, 0, 0, 0, 0, 1, 1]  # the planner's tokens are context
    assert s.logprobs == [0.0, 0.0, 0.0, 0.0, 0.0, -0.1, -0.2]
    assert s.versions == [None, None, None, None, None, 3, 3]
    assert s.calls == (SampleCall("p1", "planner", 2, 2, False), SampleCall("s1", "solver", 5, 2, True))
    assert (rs.num_calls, rs.merge_misses, rs.reward) == (1, 0, 1.0)
    assert agent_counts(rs.samples) == {
        "solver": {"calls_trained": 1, "tokens_trained": 2, "calls_context": 0},
        "planner": {"calls_trained": 0, "tokens_trained": 0, "calls_context": 1},
    }
    # without agent_match both agents are trained: two samples (the planner's second call
    # starts a conversation of its own)
    both = SampleAdapter().adapt(spans)[0]
    assert [x.loss_mask for x in both.samples] == [[0, 0, 1, 1, 0, 1, 1], [0, 1]]
    assert agent_counts(both.samples)["planner"] == {"calls_trained": 2, "tokens_trained": 3, "calls_context": 0}


def test_other_agents_may_use_a_model_without_token_ids() -> None:
    # the frozen planner calls an API that returns no token ids: skipped, counted, no error
    spans = [call("p1", [], [], t=0, agent="planner", token_ids=False), call("s1", [1], [2], t=1, agent="solver")]
    (rs,) = SampleAdapter(agent_match="solver").adapt(spans)
    assert [s.token_ids for s in rs.samples] == [[1, 2]] and rs.skipped_calls == 1
    with pytest.raises(MissingTokenIdsError):
        SampleAdapter(agent_match="planner").adapt(spans)


def test_a_rollout_where_the_matched_agent_never_called_has_no_samples_but_keeps_its_reward() -> None:
    (rs,) = SampleAdapter(agent_match="solver").adapt([call("p1", [1], [2], agent="planner"), reward(0.0, t=1)])
    assert rs.samples == [] and rs.num_calls == 0 and rs.reward == 0.0
