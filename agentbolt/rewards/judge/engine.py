"""The run's own engine as the judge, called directly (not through the gateway).

The gateway records every call it proxies as a model call of a rollout, and GRPO trains
on those; this client hands the judge's messages to the :class:`~agentbolt.engines.Engine`
object itself, so nothing is recorded but the ``agentbolt.judge`` span. The answer comes
from the weights being served now: with GRPO, the policy as of the step being judged (a
model judging itself can learn to please itself: prefer a fixed judge when you have one).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.rewards.judge.client import JudgeReply, Message
from agentbolt.rewards.judge.errors import JudgeCallError
from agentbolt.rewards.judge.openai import chat_reply

__all__ = ["EngineJudgeClient"]


class EngineJudgeClient:
    """Judge with ``engine`` (greedy). ``model`` is the name sent in the body (engines
    serving one model ignore it)."""

    def __init__(self, engine: Engine, *, model: str = "judge", temperature: float = 0.0) -> None:
        self.engine = engine
        self.model = model
        self.temperature = temperature

    @property
    def description(self) -> str:
        return f"engine {self.engine.name}"

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> JudgeReply:
        body = {"model": self.model, "messages": list(messages), "max_tokens": max_tokens,
                "temperature": self.temperature}
        try:
            data = await self.engine.chat_completions(body)
        except EngineError as exc:
            raise JudgeCallError(f"the {self.engine.name} engine could not answer the judge: {exc.message}",
                                 status_code=exc.status_code, retryable=exc.retryable) from exc
        return chat_reply(data, what=f"the {self.engine.name} engine")
