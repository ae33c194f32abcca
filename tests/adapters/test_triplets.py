"""TripletAdapter: one (prompt, response, reward) per model call; the reward rules;
agent_match; the token-id rule."""

from __future__ import annotations

import json

import pytest

from agentbolt.adapters import (
    MissingTokenIdsError,
    Triplet,
    TripletAdapter,
    require_token_ids,
)

from .spans import Attempt, ids_of, user


def three_step_attempt() -> Attempt:
    """planner call, reward 0.2, solver call, solver call, reward 1.0, critic call."""
    a = Attempt(resources_version=3)
    a.chat("p1", [user("plan it")], "the plan", agent="planner")
    a.reward(0.2)
    a.chat("s1", [user("solve step 1")], "step 1", agent="solver")
    a.chat("s2", [user("solve step 2")], "step 2", agent="solver")
    a.reward(1.0)
    a.chat("k1", [user("criticise")], "fine", agent="critic")
    return a


def test_a_triplet_carries_prompt_response_ids_logprobs_and_provenance() -> None:
    a = three_step_attempt()
    t = TripletAdapter().adapt(a.spans)[0]
    assert isinstance(t, Triplet)
    assert t.prompt.messages == [user("plan it")] and t.prompt.token_ids == ids_of(json.dumps([user("plan it")]))
    assert t.prompt.text is None  # a chat prompt is messages; agentbolt renders no template
    assert t.response.text == "the plan" and t.response.token_ids == ids_of("the plan")
    assert t.response.message == {"role": "assistant", "content": "the plan", "refusal": None}
    assert t.logprobs == [-0.5] * len("the plan")
    assert (t.rollout_id, t.attempt_id, t.span_id, t.agent_name, t.index) == ("ro-1", "at-1", "p1", "planner", 0)
    assert t.token_ids_source == "engine" and t.has_token_ids
    assert t.model == "m-served" and t.resources_version == 3
    assert t.model_dump()["has_token_ids"] is True


def test_final_rule_gives_the_last_reward_to_every_call() -> None:
    triplets = TripletAdapter(reward_rule="final").adapt(three_step_attempt().spans)
    assert [(t.span_id, t.reward) for t in triplets] == [("p1", 1.0), ("s1", 1.0), ("s2", 1.0), ("k1", 1.0)]


def test_preceding_rule_gives_each_reward_to_the_call_before_it() -> None:
    triplets = TripletAdapter(reward_rule="preceding").adapt(three_step_attempt().spans)
    assert [(t.span_id, t.reward) for t in triplets] == [("p1", 0.2), ("s1", None), ("s2", 1.0), ("k1", None)]


def test_preceding_rule_keeps_the_last_of_several_rewards_and_drops_early_ones() -> None:
    a = Attempt()
    a.reward(9.0)  # before any call: nobody's
    a.chat("c1", [user("x")])
    a.reward(0.1)
    a.reward(0.7)
    rewards = [t.reward for t in TripletAdapter(reward_rule="preceding").adapt(a.spans)]
    assert rewards == [0.7]


def test_without_reward_spans_rewards_are_none_not_zero() -> None:
    a = Attempt()
    a.chat("c1", [user("x")])
    for rule in ("final", "preceding"):
        assert [t.reward for t in TripletAdapter(reward_rule=rule).adapt(a.spans)] == [None]


def test_agent_match_selects_after_rewards_are_assigned() -> None:
    """The 0.2 that followed the planner's call stays the planner's: it does not slide
    onto a solver call when the planner is filtered out."""
    adapter = TripletAdapter(reward_rule="preceding", agent_match="solver")
    triplets = adapter.adapt(three_step_attempt().spans)
    assert [(t.span_id, t.agent_name, t.index, t.reward) for t in triplets] == [
        ("s1", "solver", 1, None),
        ("s2", "solver", 2, 1.0),
    ]


def test_calls_without_agent_name_are_dropped_by_any_pattern() -> None:
    a = Attempt()
    a.chat("c1", [user("x")])
    a.chat("c2", [user("y")], agent="solver")
    assert [t.span_id for t in TripletAdapter(agent_match=".*").adapt(a.spans)] == ["c2"]
    assert [t.span_id for t in TripletAdapter().adapt(a.spans)] == ["c1", "c2"]


def test_failed_calls_are_left_out_and_take_no_reward() -> None:
    a = Attempt()
    a.chat("c1", [user("x")], "ok")
    a.chat("c2", [user("y")], failed=True)
    a.reward(1.0)
    (t,) = TripletAdapter(reward_rule="preceding").adapt(a.spans)
    assert (t.span_id, t.index, t.reward) == ("c1", 0, 1.0)


def test_each_attempt_has_its_own_rewards() -> None:
    a, b = Attempt("ro-1", "at-1"), Attempt("ro-2", "at-2")
    a.chat("c1", [user("a")])
    a.reward(1.0)
    b.chat("c1", [user("b")])
    b.reward(0.0)
    triplets = TripletAdapter().adapt([*a.spans, *b.spans])
    assert [(t.rollout_id, t.reward, t.index) for t in triplets] == [("ro-1", 1.0, 0), ("ro-2", 0.0, 0)]


def test_completions_have_prompt_text() -> None:
    a = Attempt()
    a.completion("c1", "2+2=", "4")
    (t,) = TripletAdapter().adapt(a.spans)
    assert t.prompt.text == "2+2=" and t.prompt.messages is None and t.response.text == "4"
    assert t.prompt.token_ids == ids_of("2+2=") and t.logprobs is None


def test_calls_without_token_ids_are_kept_and_flagged() -> None:
    a = Attempt()
    a.chat("c1", [user("x")], "with ids")
    a.chat("c2", [user("y")], "no ids", token_ids=False)
    triplets = TripletAdapter().adapt(a.spans)
    assert [(t.has_token_ids, t.token_ids_source) for t in triplets] == [(True, "engine"), (False, "none")]
    assert triplets[1].prompt.token_ids is None and triplets[1].response.token_ids is None
    assert triplets[1].response.text == "no ids"  # the text is still there, for SFT


def test_require_token_ids_refuses_to_retokenize() -> None:
    a = Attempt()
    a.chat("c1", [user("x")])
    a.chat("c2", [user("y")], token_ids=False)
    triplets = TripletAdapter().adapt(a.spans)
    with pytest.raises(MissingTokenIdsError, match=r"1 of 2 model calls have no token ids.*ro-1/c2.*return_token_ids"):
        require_token_ids(triplets)
    good = [t for t in triplets if t.has_token_ids]
    assert require_token_ids(good) is good


def test_unknown_reward_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="'final'.*'preceding'"):
        TripletAdapter(reward_rule="mean")  # type: ignore[arg-type]
