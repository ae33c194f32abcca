"""The seam between a judge and the model that answers it: :class:`JudgeClient`.

A client takes chat messages and returns the answer's text. The ones agentbolt ships:
:class:`~agentbolt.rewards.judge.openai.OpenAIJudgeClient` (any OpenAI-compatible
endpoint), :class:`~agentbolt.rewards.judge.anthropic.AnthropicJudgeClient` (the
Messages API), :class:`~agentbolt.rewards.judge.engine.EngineJudgeClient` (the run's own
engine, called directly) and :class:`~agentbolt.rewards.judge.scripted.ScriptedJudgeClient`
(deterministic answers, for tests).

Judge calls are made with plain HTTP (httpx), never with the ``openai`` client: inside a
rollout that client is traced, and a traced call would be recorded as one of the agent's
model calls, which GRPO trains on. What a judge call is recorded as instead is the
``agentbolt.judge`` span (:mod:`agentbolt.rewards.judge.record`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["JudgeCall", "JudgeClient", "JudgeReply", "Message"]

Message = dict[str, str]
"""A chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One judge call as it is recorded: what was asked, who answered, what it wrote."""

    call_id: str
    client: str
    """:attr:`JudgeClient.description`."""
    messages: list[Message]
    answer: str
    """The last answer (the one parsed, or the one that failed to parse)."""
    model: str | None
    start_time: float
    end_time: float
    attempts: int = 1
    """Calls made: a malformed answer is asked again, up to the judge's ``retries``."""


@dataclass(frozen=True, slots=True)
class JudgeReply:
    """What the judge's model answered."""

    text: str
    model: str | None = None
    """The model that answered, when the endpoint said."""


class JudgeClient(Protocol):
    """Something that answers chat messages with text."""

    @property
    def description(self) -> str:
        """Which endpoint and model, in words (recorded on every judge span; never a secret)."""
        ...

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> JudgeReply:
        """The answer to ``messages``; raises
        :class:`~agentbolt.rewards.judge.errors.JudgeCallError` when there is none."""
        ...
