"""The RL adapter: spans → the token-level samples GRPO trains on.

::

    spans = await store.get_spans(rollout_id, "latest")
    (found,) = SampleAdapter(agent_match="solver").adapt(spans)   # one RolloutSamples per attempt
    found.samples[0].token_ids, found.samples[0].loss_mask, found.reward

This is the one place where spans become RL training data: :class:`~agentbolt.algorithms.GRPO`
trains on exactly these samples, ``Trainer.dev`` previews them and
``agentbolt store export --samples rl`` writes them.

**Merging by lineage.** A multi-turn agent calls the model again and again on a growing
conversation. The attempt's successful calls are taken in start order; a call extends the
earlier sample (draft) whose tokens — its prompts and answers so far — are the *longest
exact prefix* of the call's prompt token ids, among **all** the attempt's drafts, not only
the latest: the tokens in between (tool output, a new user turn, the answer of a sub-agent
called meanwhile) are context, loss mask 0, and its response tokens follow. So the
interleaved conversations of a main agent and its sub-agents each merge within themselves.
A call that extends no draft starts a new sample, and the sample records why
(``Sample.origin``, :mod:`.lineage`): ``first``, ``new_conversation`` (a sub-agent, a
title call), or ``diverged`` — a long prefix shared with an earlier draft, then other
tokens (compaction, a rewritten or dropped turn, stripped reasoning, a re-rendered
template) — with the token index where it diverged and the draft it diverged from; those
shared tokens go through the model once in the update (prefix groups in
:mod:`agentbolt.training.batch`). A call without an agent name in a conversation
other than the first is named after its system prompt (``subagent-<hash>``). One sample
is one forward pass, trained on exactly the tokens the model sampled, with their
sampling-time logprobs and the policy version that produced them.
``RolloutSamples.counts`` (:class:`MergeCounts`) sums it up per attempt: calls,
conversations, samples, breaks by cause, tokens trained, context and shared.

**agent_match** (:mod:`.match`) picks the agents whose calls are trained. The response
tokens of a matched call get loss mask 1; those of any other agent's call stay in the
sample as context (mask 0) — they shape what the trained agent sees — and train nothing.
A sample with no trained token is left out. The rollout keeps its reward either way: the
other agents' work counts toward it, only the matched agents learn from it.

**Rewards are per rollout**: ``reward`` is the attempt's final reward (its last reward
span, the value the store keeps as the rollout's reward); GRPO turns it into the
rollout's advantage and copies that to each of its samples.

**Token ids are never made up**: a matched call without the engine's token ids, or
without a logprob for every response token, is refused with :class:`MissingTokenIdsError`
(route the agent through the gateway). Another agent's call without ids cannot be
context; it is skipped and counted (``skipped_calls``), so the frozen agents may use any
model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbolt.adapters.attempts import AttemptCalls, parse_attempts
from agentbolt.adapters.calls import ModelCall
from agentbolt.adapters.lineage import (
    BREAK_CAUSES,
    Branch,
    BreakCause,
    Origin,
    break_cause,
    common_prefix,
    find_branch,
    subagent_name,
)
from agentbolt.adapters.match import AgentMatcher, agent_matcher
from agentbolt.adapters.triplets import MissingTokenIdsError
from agentbolt.semconv import LLM_POLICY_VERSION
from agentbolt.types import Span

__all__ = ["UNNAMED_AGENT", "MergeCounts", "Origin", "RolloutSamples", "Sample", "SampleAdapter", "SampleCall",
           "agent_counts", "build_samples"]

UNNAMED_AGENT = "(unnamed)"
"""How :func:`agent_counts` names the calls that have no agent name."""


@dataclass(frozen=True, slots=True)
class SampleCall:
    """Where one model call's response lies in a sample: ``token_ids[start:start+length]``."""

    span_id: str
    agent_name: str | None
    start: int
    length: int
    trained: bool
    """Whether its tokens carry loss (its agent matched ``agent_match``)."""
    finish_reason: str | None = None
    """Why the engine stopped: ``stop``, ``length`` (cut at ``max_tokens``: truncated), ``tool_calls``..."""

    @property
    def truncated(self) -> bool:
        """The answer was cut at ``max_tokens`` (``finish_reason == "length"``)."""
        return self.finish_reason == "length"


@dataclass(frozen=True, slots=True)
class Sample:
    """One training sequence: ``token_ids[t]`` is trained when ``loss_mask[t] == 1``.

    ``logprobs[t]`` is log π_behav(token t | tokens < t) at sampling time and
    ``versions[t]`` the policy version that sampled it (both 0.0 / None where the mask
    is 0). ``span_ids`` are the calls whose responses are in the sample (``calls`` says
    where, by which agent, and whether trained). ``reward`` is the rollout's;
    ``advantage`` too, set by GRPO's ``apply_advantages``.
    """

    rollout_id: str
    attempt_id: str
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    versions: list[int | None]
    span_ids: list[str]
    advantage: float = 0.0
    reward: float | None = None
    calls: tuple[SampleCall, ...] = ()
    origin: Origin = field(default_factory=Origin)
    """Why it started: the first call, a new conversation, or diverged from an earlier one (:mod:`.lineage`)."""

    @property
    def num_response_tokens(self) -> int:
        """How many tokens are trained (mask 1)."""
        return sum(self.loss_mask)

    @property
    def oldest_version(self) -> int | None:
        """The oldest policy version among the trained tokens (None: not recorded)."""
        known = [v for v, m in zip(self.versions, self.loss_mask, strict=True) if m and v is not None]
        return min(known) if known else None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy (export, ``Trainer.dev``)."""
        return {
            "rollout_id": self.rollout_id, "attempt_id": self.attempt_id, "reward": self.reward,
            "advantage": self.advantage, "num_tokens": len(self.token_ids),
            "num_trained_tokens": self.num_response_tokens, "token_ids": self.token_ids,
            "loss_mask": self.loss_mask, "logprobs": self.logprobs, "versions": self.versions,
            "calls": [{"span_id": c.span_id, "agent_name": c.agent_name, "start": c.start, "length": c.length,
                       "trained": c.trained, "finish_reason": c.finish_reason} for c in self.calls],
            "origin": self.origin.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class MergeCounts:
    """How an attempt's calls became samples (:func:`build_samples`)."""

    calls: int = 0
    """Calls with token ids, every agent's: each extends a draft or starts one."""
    conversations: int = 0
    """Their conversations: the first, and one per ``new_conversation`` start (trained or not)."""
    samples: int = 0
    breaks: Mapping[BreakCause, int] = field(default_factory=dict)
    """How many of the samples started so, per cause (``first`` included: at most 1)."""
    tokens_trained: int = 0
    tokens_context: int = 0
    """The samples' untrained tokens: prompts, tool output, other agents' answers."""
    tokens_shared: int = 0
    """Untrained leading tokens a ``diverged`` sample has in common with an earlier sample
    of the attempt (beyond the one token each row keeps of its own): what prefix groups can
    run once in the update (:mod:`agentbolt.training.batch`), not again per sample."""

    @classmethod
    def of(cls, samples: Sequence[Sample], *, calls: int, conversations: int) -> MergeCounts:
        breaks = {cause: sum(s.origin.cause == cause for s in samples) for cause in BREAK_CAUSES}
        trained = sum(s.num_response_tokens for s in samples)
        shared = 0
        for i, s in enumerate(samples):
            if s.origin.cause != "diverged":  # a new conversation shares a template's header at most
                continue
            shared += max([0, *(min(common_prefix(s.token_ids, e.token_ids), _first_trained(s), _first_trained(e)) - 1
                                for e in samples[:i])])
        return cls(calls, conversations, len(samples), breaks, trained,
                   sum(len(s.token_ids) for s in samples) - trained, shared)

    @property
    def merge_breaks(self) -> int:
        """Samples that did not start as the attempt's first call: ``new_conversation`` + ``diverged``."""
        return self.samples - self.breaks.get("first", 0)


@dataclass(frozen=True, slots=True)
class RolloutSamples:
    """The samples of one rollout attempt, its reward, and how merging went."""

    rollout_id: str
    attempt_id: str
    samples: list[Sample] = field(default_factory=list)
    num_calls: int = 0
    """Trained calls (those ``agent_match`` selected)."""
    merge_misses: int = 0
    """Trained calls after the first that could not extend a sample and started a new one."""
    reward: float | None = None
    skipped_calls: int = 0
    """Other agents' calls without token ids: not even context."""
    counts: MergeCounts = field(default_factory=MergeCounts)
    """Calls, conversations, samples, breaks by cause, tokens trained / context / shared."""

    @property
    def merge_rate(self) -> float:
        """Share of follow-up trained calls that merged (1.0 with at most one)."""
        follow_ups = self.num_calls - 1
        return 1.0 if follow_ups <= 0 else 1.0 - self.merge_misses / follow_ups


class SampleAdapter:
    """Spans → :class:`RolloutSamples` per attempt (see module doc). ``agent_match``: a
    regular expression on the agent name (None: every call is trained)."""

    def __init__(self, agent_match: str | re.Pattern[str] | AgentMatcher | None = None) -> None:
        self.matcher = agent_matcher(agent_match)

    def __repr__(self) -> str:
        pattern = None if self.matcher.pattern is None else self.matcher.pattern.pattern
        return f"SampleAdapter(agent_match={pattern!r})"

    def adapt(self, spans: Iterable[Span]) -> list[RolloutSamples]:
        """One :class:`RolloutSamples` per attempt in ``spans`` (pass the attempts to
        train on, e.g. ``store.get_spans(rollout_id, "latest")``)."""
        return self.adapt_calls(parse_attempts(spans))

    def adapt_calls(self, attempts: Iterable[AttemptCalls]) -> list[RolloutSamples]:
        """:meth:`adapt` on calls already parsed (:func:`~.attempts.parse_attempts`): one
        :class:`RolloutSamples` per attempt that made a call."""
        found = (build_samples(attempt.calls, self.matcher, reward=attempt.reward) for attempt in attempts)
        return [f for f in found if f is not None]

    def __call__(self, spans: Iterable[Span]) -> list[Sample]:
        """Every sample of every attempt in ``spans``, in order."""
        return [s for found in self.adapt(spans) for s in found.samples]


def build_samples(calls: Sequence[ModelCall], agent_match: str | AgentMatcher | None = None, *,
                  reward: float | None = None) -> RolloutSamples | None:
    """Merge the model calls of one attempt (in start order; failed calls are skipped)
    into samples by lineage (see module doc); None when there is no call at all."""
    calls = [c for c in calls if not c.failed]
    if not calls:
        return None
    rollout_id, attempt_id = calls[0].rollout_id, calls[0].attempt_id
    if any((c.rollout_id, c.attempt_id) != (rollout_id, attempt_id) for c in calls):
        raise ValueError("build_samples takes the calls of one attempt; split them with group_by_attempt first")
    matcher = agent_matcher(agent_match)
    drafts: list[_Draft] = []
    trained_calls: list[ModelCall] = []
    misses = skipped = conversations = 0
    for call in calls:
        if not call.has_token_ids:  # refused below if trained; else not even context
            if matcher(call.agent_name):
                trained_calls.append(call)
            else:
                skipped += 1
            continue
        prompt = call.prompt_token_ids or []
        branch = find_branch(prompt, [d.token_ids for d in drafts])
        new = branch.extends is None
        if branch.extends is not None:
            draft = drafts[branch.extends]
        else:
            draft = _Draft(rollout_id, attempt_id, _origin(branch, drafts, conversations), len(prompt), call.span_id)
            conversations += draft.origin.cause != "diverged"
        name = call.agent_name or (subagent_name(call) if draft.origin.conversation > 0 else None)
        train = matcher(name)
        if new:
            if train and any(d.trained for d in drafts):
                misses += 1
            drafts.append(draft)
        draft.add_context(prompt[len(draft.token_ids):])
        draft.add_response(call, name, train)
        if train:
            trained_calls.append(call)
    _require_tokens(trained_calls)
    samples = [d.freeze(reward) for d in drafts if d.trained]
    counts = MergeCounts.of(samples, calls=len(calls) - skipped, conversations=conversations)
    return RolloutSamples(rollout_id, attempt_id, samples, len(trained_calls), misses, reward, skipped, counts)


def _origin(branch: Branch, drafts: Sequence[_Draft], conversations: int) -> Origin:
    """How a sample that extends no draft starts (see :mod:`.lineage`)."""
    nearest = None if branch.nearest is None else drafts[branch.nearest]
    cause = break_cause(branch, 0 if nearest is None else nearest.opening)
    if cause != "diverged" or nearest is None:
        return Origin(cause, conversations)
    return Origin(cause, nearest.origin.conversation, nearest.first_span, branch.shared)


def agent_counts(samples: Iterable[Sample]) -> dict[str, dict[str, int]]:
    """Per agent name: ``calls_trained``, ``tokens_trained`` and ``calls_context`` (calls
    that were only context) over ``samples``."""
    out: dict[str, dict[str, int]] = {}
    for sample in samples:
        for call in sample.calls:
            row = out.setdefault(call.agent_name or UNNAMED_AGENT,
                                 {"calls_trained": 0, "tokens_trained": 0, "calls_context": 0})
            if call.trained:
                row["calls_trained"] += 1
                row["tokens_trained"] += call.length
            else:
                row["calls_context"] += 1
    return out


@dataclass(slots=True)
class _Draft:
    rollout_id: str
    attempt_id: str
    origin: Origin
    opening: int
    """The length of its first prompt."""
    first_span: str
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int | None] = field(default_factory=list)
    calls: list[SampleCall] = field(default_factory=list)
    trained: bool = False

    def add_context(self, ids: Sequence[int]) -> None:
        self.token_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.versions += [None] * len(ids)

    def add_response(self, call: ModelCall, agent_name: str | None, train: bool) -> None:
        ids = call.response_token_ids or []
        self.calls.append(SampleCall(call.span_id, agent_name, len(self.token_ids), len(ids), train,
                                     call.finish_reason))
        if not train:
            self.add_context(ids)
            return
        version = call.attributes.get(LLM_POLICY_VERSION)
        version = version if isinstance(version, int) and not isinstance(version, bool) else None
        self.token_ids += ids
        self.loss_mask += [1] * len(ids)
        self.logprobs += call.response_logprobs or []
        self.versions += [version] * len(ids)
        self.trained = self.trained or bool(ids)

    def freeze(self, reward: float | None) -> Sample:
        return Sample(self.rollout_id, self.attempt_id, self.token_ids, self.loss_mask, self.logprobs, self.versions,
                      [c.span_id for c in self.calls], reward=reward, calls=tuple(self.calls), origin=self.origin)


def _first_trained(sample: Sample) -> int:
    return sample.loss_mask.index(1) if 1 in sample.loss_mask else len(sample.loss_mask)


def _require_tokens(calls: Sequence[ModelCall]) -> None:
    missing = [c for c in calls if not c.has_token_ids]
    if missing:
        raise MissingTokenIdsError(
            f"{len(missing)} of {len(calls)} trained model calls of rollout {calls[0].rollout_id} have no token ids "
            f"from the engine (e.g. span {missing[0].span_id}, model {missing[0].model or 'unknown'}), so they cannot "
            "be trained with RL; agentbolt does not retokenize text. Route the agent through the gateway, or serve "
            "the model with an engine that returns token ids (vLLM: extra_body={'return_token_ids': True}); or "
            "leave these agents out with agent_match."
        )
    bad = [
        c for c in calls if c.response_logprobs is None or len(c.response_logprobs) != len(c.response_token_ids or [])
    ]
    if bad:
        raise MissingTokenIdsError(
            f"model call {bad[0].span_id} of rollout {bad[0].rollout_id} has no sampling-time logprob for every "
            "response token, which GRPO's importance ratio needs. Ask the engine for them (OpenAI API: "
            "logprobs=True); the gateway does this for you."
        )
