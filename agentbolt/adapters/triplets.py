"""Per-call training triplets: (prompt, response, reward) for each model call.

::

    spans = await store.get_spans(rollout_id, "latest")
    triplets = TripletAdapter(reward_rule="final", agent_match="solver").adapt(spans)
    require_token_ids(triplets)          # before RL: every triplet must have the engine's ids

One :class:`Triplet` per successful model call of each attempt in ``spans`` (failed
calls — status ``error`` — have no response and are left out), in the order the calls
started. The prompt and the response carry the engine's token ids and the messages /
text; the reward comes from the reward rule (:mod:`agentbolt.adapters.rewards`);
``agent_match`` keeps the calls of the agents it matches (:mod:`agentbolt.adapters.match`).

**Token ids are never made up.** They are the ones the engine returned with the call
(``agentbolt.llm.token_ids_source == "engine"``). A call whose engine returned none is
kept, with ``token_ids=None`` and ``has_token_ids=False``, so that SFT and prompt
optimisation can still use its text; RL needs the ids, and :func:`require_token_ids`
stops it with an explanation instead of retokenizing the text (which would train on
token sequences the model never sampled).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from agentbolt.adapters.calls import ModelCall, extract_model_calls, group_by_attempt
from agentbolt.adapters.match import AgentMatcher, agent_matcher
from agentbolt.adapters.rewards import RewardRule, assign_rewards, check_reward_rule
from agentbolt.semconv import RESOURCES_VERSION, ROLLOUT_SPAN
from agentbolt.types import Span

__all__ = [
    "MissingTokenIdsError",
    "Triplet",
    "TripletAdapter",
    "TripletPrompt",
    "TripletResponse",
    "require_token_ids",
]


class TripletPrompt(BaseModel):
    """What the model was given: the engine's token ids, and the chat ``messages``
    (chat calls) or the ``text`` (completions), plus the ``tools`` it was offered."""

    model_config = ConfigDict(frozen=True)

    token_ids: list[int] | None
    messages: list[dict[str, Any]] | None = None
    text: str | None = None
    tools: list[dict[str, Any]] | None = None


class TripletResponse(BaseModel):
    """What the model answered: the engine's token ids, the ``text`` (None for a pure
    tool call) and the assistant ``message`` with its ``tool_calls``."""

    model_config = ConfigDict(frozen=True)

    token_ids: list[int] | None
    text: str | None = None
    message: dict[str, Any] | None = None
    finish_reason: str | None = None


class Triplet(BaseModel):
    """One model call as a training sample."""

    model_config = ConfigDict(frozen=True)

    prompt: TripletPrompt
    response: TripletResponse
    logprobs: list[float] | None
    """The sampled tokens' logprobs at sampling time (None if the request asked for none)."""
    reward: float | None
    """From the reward rule; None when the rule gives this call no reward."""
    rollout_id: str
    attempt_id: str
    span_id: str
    agent_name: str | None
    index: int
    """Position of the call among all model calls of its attempt (0-based, by start
    time) — calls left out (other agents, failed calls) keep their numbers, so this
    identifies the call within the attempt."""
    model: str | None = None
    token_ids_source: str = "none"
    """``engine`` (the ids are the engine's) or ``none`` (it returned none)."""
    resources_version: int | None = None
    """The resources version (policy version) the attempt ran with, if recorded."""

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy rejects decorated properties
    @property
    def has_token_ids(self) -> bool:
        """Whether both the prompt's and the response's token ids are known."""
        return self.prompt.token_ids is not None and self.response.token_ids is not None


class MissingTokenIdsError(ValueError):
    """Some triplets have no token ids, and the caller (RL) needs them."""


class TripletAdapter:
    """Spans → :class:`Triplet` list. ``reward_rule`` is ``"final"`` or
    ``"preceding"`` (see :mod:`agentbolt.adapters.rewards`); ``agent_match`` a regular
    expression on the agent name (None: every call)."""

    def __init__(
        self,
        reward_rule: RewardRule = "final",
        agent_match: str | re.Pattern[str] | AgentMatcher | None = None,
    ) -> None:
        self.reward_rule: RewardRule = check_reward_rule(reward_rule)
        self.matcher = agent_matcher(agent_match)

    def __repr__(self) -> str:
        pattern = None if self.matcher.pattern is None else self.matcher.pattern.pattern
        return f"TripletAdapter(reward_rule={self.reward_rule!r}, agent_match={pattern!r})"

    def __call__(self, spans: Iterable[Span]) -> list[Triplet]:
        return self.adapt(spans)

    def adapt(self, spans: Iterable[Span]) -> list[Triplet]:
        """The triplets of every attempt in ``spans`` (attempts in order of first
        appearance). Pass the spans of the attempts you want to train on — e.g.
        ``store.get_spans(rollout_id, "latest")`` — not those of failed tries."""
        out: list[Triplet] = []
        for group in group_by_attempt(spans):
            out.extend(self._adapt_attempt(group))
        return out

    def _adapt_attempt(self, spans: Sequence[Span]) -> list[Triplet]:
        calls = extract_model_calls(spans)
        indexed = [(i, c) for i, c in enumerate(calls) if not c.failed]
        rewards = assign_rewards([c for _, c in indexed], spans, self.reward_rule)
        version = _resources_version(spans)
        return [
            _triplet(call, index, reward, version)
            for (index, call), reward in zip(indexed, rewards, strict=True)
            if self.matcher(call.agent_name)
        ]


def _triplet(call: ModelCall, index: int, reward: float | None, version: int | None) -> Triplet:
    prompt_text = call.prompt if isinstance(call.prompt, str) else None
    return Triplet(
        prompt=TripletPrompt(
            token_ids=call.prompt_token_ids,
            messages=call.messages,
            text=prompt_text,
            tools=call.tools or None,
        ),
        response=TripletResponse(
            token_ids=call.response_token_ids,
            text=call.response_text,
            message=call.response_message,
            finish_reason=call.finish_reason,
        ),
        logprobs=call.response_logprobs,
        reward=reward,
        rollout_id=call.rollout_id,
        attempt_id=call.attempt_id,
        span_id=call.span_id,
        agent_name=call.agent_name,
        index=index,
        model=call.model,
        token_ids_source=call.token_ids_source,
        resources_version=version,
    )


def _resources_version(spans: Sequence[Span]) -> int | None:
    for s in spans:
        if s.name == ROLLOUT_SPAN:
            value = s.attributes.get(RESOURCES_VERSION)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def require_token_ids(triplets: Sequence[Triplet]) -> Sequence[Triplet]:
    """``triplets`` unchanged if every one has the engine's prompt and response token
    ids; otherwise a :class:`MissingTokenIdsError` that says which and how to fix it.

    agentbolt never retokenizes text to fill the gap: the tokens must be the ones the
    model sampled, or the policy gradient is computed on sequences it never produced.
    """
    missing = [t for t in triplets if not t.has_token_ids]
    if not missing:
        return triplets
    examples = ", ".join(f"{t.rollout_id}/{t.span_id} ({t.model or 'unknown model'})" for t in missing[:3])
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    raise MissingTokenIdsError(
        f"{len(missing)} of {len(triplets)} model calls have no token ids from the engine "
        f"(e.g. {examples}{more}), so they cannot be used for RL; agentbolt does not retokenize text. "
        "Serve the model with an engine that returns them — vLLM does when the request says "
        "return_token_ids (openai client: extra_body={'return_token_ids': True}). For SFT or prompt "
        "optimisation use the text (MessagesAdapter) instead, or drop these triplets with "
        "[t for t in triplets if t.has_token_ids]."
    )
