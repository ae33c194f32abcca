"""Merging by lineage: a call extends the earlier conversation whose tokens are the longest
exact prefix of its prompt — not only the latest one — so interleaved sub-agent
conversations each merge within themselves; every new sample says why it started
(``first``, ``new_conversation``, ``diverged`` with where and from what), and the attempt
counts its calls, conversations, samples, breaks and tokens."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from agentbolt.adapters import extract_model_calls
from agentbolt.adapters.lineage import MIN_DIVERGED_PREFIX, Origin, common_prefix, find_branch, subagent_name
from agentbolt.adapters.samples import RolloutSamples, SampleAdapter, build_samples
from agentbolt.types import Span

from .test_samples import call, reward

HEADER = [1, 2, 3]  # a chat template's "<|im_start|>system\n": every conversation starts so
MAIN_SYSTEM = HEADER + list(range(100, 180))  # 83 tokens
SUB_SYSTEM = HEADER + list(range(200, 240))  # 43 tokens


def chat(span_id: str, prompt: list[int], response: list[int], *, t: float, system: str | None = None,
         **kw: Any) -> Span:
    """A gateway call whose request has ``system`` as its system message."""
    span = call(span_id, prompt, response, t=t, **kw)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": "q"}]
    span.attributes["agentbolt.llm.request"] = json.dumps({"model": "m", "messages": messages})
    return span


def samples_of(spans: list[Span], agent_match: str | None = None) -> RolloutSamples:
    (found,) = SampleAdapter(agent_match).adapt(spans)
    return found


def test_one_linear_conversation_stays_one_sample_that_started_first() -> None:
    task = [*MAIN_SYSTEM, 10, 11]
    rs = samples_of([chat("m1", task, [20, 21], t=0), chat("m2", [*task, 20, 21, 30], [22], t=1),
                     chat("m3", [*task, 20, 21, 30, 22, 31, 32], [23, 24], t=2)])
    (s,) = rs.samples
    assert s.span_ids == ["m1", "m2", "m3"] and s.origin == Origin("first", 0)
    assert (rs.num_calls, rs.merge_misses, rs.merge_rate) == (3, 0, 1.0)
    c = rs.counts
    assert (c.calls, c.conversations, c.samples, c.merge_breaks) == (3, 1, 1, 0)
    assert dict(c.breaks) == {"first": 1, "new_conversation": 0, "diverged": 0}
    assert (c.tokens_trained, c.tokens_context, c.tokens_shared) == (5, len(s.token_ids) - 5, 0)


def test_interleaved_main_and_sub_agent_conversations_merge_each_within_itself() -> None:
    # main: M → a1; sub (Task tool): S → b1; main continues M a1 t1 → a2; sub continues S b1 u1 → b2;
    # main ends with the sub-agent's result. In call order every call breaks the latest
    # sample (4 samples before); by lineage each conversation is one sample.
    m, sub = [*MAIN_SYSTEM, 10, 11], [*SUB_SYSTEM, 12]
    spans = [
        chat("m1", m, [20], t=0, system="You are the main agent."),
        chat("s1", sub, [40], t=1, system="You search the code."),
        chat("m2", [*m, 20, 21], [22], t=2, system="You are the main agent."),
        chat("s2", [*sub, 40, 41], [42], t=3, system="You search the code."),
        chat("m3", [*m, 20, 21, 22, 43], [23], t=4, system="You are the main agent."),
        reward(1.0, t=5),
    ]
    rs = samples_of(spans)

    main, helper = rs.samples
    assert main.span_ids == ["m1", "m2", "m3"] and helper.span_ids == ["s1", "s2"]
    assert main.token_ids == [*m, 20, 21, 22, 43, 23] and main.loss_mask == [0] * len(m) + [1, 0, 1, 0, 1]
    assert helper.token_ids == [*sub, 40, 41, 42] and helper.loss_mask == [0] * len(sub) + [1, 0, 1]
    # the sub-agent shares only the template's header with the main agent: a conversation of its own
    assert main.origin == Origin("first", 0)
    assert helper.origin == Origin("new_conversation", 1)
    assert (rs.merge_misses, rs.counts.conversations, rs.counts.samples) == (1, 2, 2)
    assert dict(rs.counts.breaks) == {"first": 1, "new_conversation": 1, "diverged": 0}
    # unnamed by its spans, the sub-agent is named after its own system prompt; the main agent stays unnamed
    name = "subagent-" + hashlib.sha256(b"You search the code.").hexdigest()[:8]
    assert {c.agent_name for c in helper.calls} == {name} and {c.agent_name for c in main.calls} == {None}
    # ... so agent_match selects it (or leaves it out): the main agent's tokens are not trained
    (only,) = samples_of(spans, agent_match="^subagent-").samples
    assert only.span_ids == ["s1", "s2"] and only.num_response_tokens == 2


def test_a_name_from_the_spans_wins_and_a_sub_agent_without_system_prompt_stays_unnamed() -> None:
    spans = [chat("m1", MAIN_SYSTEM, [20], t=0, system="main"), chat("s1", SUB_SYSTEM, [40], t=1, agent="explorer"),
             chat("s2", [7, 8, 9], [41], t=2)]
    rs = samples_of(spans)
    assert [c.agent_name for s in rs.samples for c in s.calls] == [None, "explorer", None]
    assert [s.origin for s in rs.samples] == [Origin("first", 0), Origin("new_conversation", 1),
                                              Origin("new_conversation", 2)]


def test_a_compacted_history_starts_a_diverged_sample_in_the_same_conversation() -> None:
    # the harness compacts: the system prompt stays, the history becomes a summary [90 91 92]
    task = [*MAIN_SYSTEM, 10, 11]
    compacted = [*MAIN_SYSTEM, 90, 91, 92]
    spans = [
        chat("m1", task, [20, 21], t=0),
        chat("m2", [*task, 20, 21, 30], [22], t=1),
        chat("m3", compacted, [50], t=2),
        chat("m4", [*compacted, 50, 51], [52], t=3),
    ]
    rs = samples_of(spans)

    before, after = rs.samples
    assert before.span_ids == ["m1", "m2"] and after.span_ids == ["m3", "m4"]
    # shares the 83 tokens of the system prompt, then differs at token 83: diverged from m1's sample
    assert after.origin == Origin("diverged", 0, diverged_from="m1", diverged_at=len(MAIN_SYSTEM))
    assert after.token_ids[: len(MAIN_SYSTEM)] == before.token_ids[: len(MAIN_SYSTEM)]
    assert after.token_ids[len(MAIN_SYSTEM)] != before.token_ids[len(MAIN_SYSTEM)]
    c = rs.counts
    assert (c.conversations, c.samples, c.merge_breaks, rs.merge_misses) == (1, 2, 1, 1)
    assert dict(c.breaks) == {"first": 1, "new_conversation": 0, "diverged": 1}
    # the shared system prompt runs once in the update: all of it but the token each row keeps
    assert c.tokens_shared == len(MAIN_SYSTEM) - 1
    assert after.as_dict()["origin"] == {"cause": "diverged", "conversation": 0, "diverged_from": "m1",
                                         "diverged_at": len(MAIN_SYSTEM)}


def test_a_rewritten_earlier_turn_diverges_where_its_tokens_change() -> None:
    # call 2 renders call 1's answer [4 5] as [4 9] (stripped reasoning, another template):
    # it shares call 1's whole opening prompt, so it is the same conversation, diverged at 4
    spans = [call("c1", [1, 2, 3], [4, 5], t=0), call("c2", [1, 2, 3, 4, 9, 6], [7], t=1),
             call("c3", [1, 2, 3, 4, 9, 6, 7, 10], [11], t=2)]
    first, second = samples_of(spans).samples
    assert first.origin == Origin("first", 0)
    assert second.origin == Origin("diverged", 0, diverged_from="c1", diverged_at=4)


def test_a_call_extends_the_longest_matching_conversation_not_the_latest() -> None:
    # a retry from before the last answer forks; later calls continue whichever branch they extend
    base = [*MAIN_SYSTEM, 10]
    spans = [
        chat("a1", base, [20], t=0),
        chat("a2", [*base, 20, 30], [21], t=1),
        chat("b1", [*base, 20, 31], [22], t=2),  # forks after a1's answer
        chat("a3", [*base, 20, 30, 21, 32], [23], t=3),  # continues a2, not the latest (b1)
    ]
    a, b = samples_of(spans).samples
    assert a.span_ids == ["a1", "a2", "a3"] and b.span_ids == ["b1"]
    assert b.origin == Origin("diverged", 0, diverged_from="a1", diverged_at=len(base) + 1)


def test_how_much_must_be_shared_to_diverge_rather_than_start_a_new_conversation() -> None:
    opening = list(range(1, 101))  # 100 tokens: a short shared part is not its whole opening prompt
    for shared, cause in ((MIN_DIVERGED_PREFIX, "diverged"), (MIN_DIVERGED_PREFIX - 1, "new_conversation")):
        other = opening[:shared] + [250] * 5
        _, second = samples_of([call("c1", opening, [7], t=0), call("c2", other, [8], t=1)]).samples
        assert second.origin.cause == cause


def test_lineage_primitives() -> None:
    assert common_prefix([1, 2, 3, 4], [1, 2, 9]) == 2 and common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix(list(range(1000)), [*list(range(999)), 0]) == 999 and common_prefix([], [1]) == 0
    drafts = [[1, 2], [1, 2, 3, 4], [5]]
    assert find_branch([1, 2, 3, 4, 5], drafts).extends == 1  # the longest prefix, not the first or latest
    miss = find_branch([1, 2, 3, 9], [[1, 2, 5], [1, 2, 3, 4], [5]])
    assert (miss.extends, miss.nearest, miss.shared) == (None, 1, 3)
    assert find_branch([1], []).nearest is None
    (c,) = extract_model_calls([chat("x", [1], [2], t=0, system="be brief")])
    assert subagent_name(c) == "subagent-" + hashlib.sha256(b"be brief").hexdigest()[:8]
    (bare,) = extract_model_calls([chat("y", [1], [2], t=0)])
    assert subagent_name(bare) is None


def test_build_samples_counts_every_agents_calls_and_only_kept_samples() -> None:
    # the planner's own conversation is context only (not matched): counted as a call and a
    # conversation, not as a sample
    spans = [call("p1", [9, 9], [8], t=0, agent="planner"), call("s1", [1], [2], t=1, agent="solver")]
    rs = build_samples(extract_model_calls(spans), "solver")
    assert rs is not None
    (s,) = rs.samples
    assert s.origin == Origin("new_conversation", 1)
    c = rs.counts
    assert (c.calls, c.conversations, c.samples, c.merge_breaks) == (2, 2, 1, 1)
    assert dict(c.breaks) == {"first": 0, "new_conversation": 1, "diverged": 0}
