"""A deterministic judge for tests: answers from a list, or from a function of the prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentbolt.rewards.judge.client import JudgeReply, Message
from agentbolt.rewards.judge.errors import JudgeCallError

__all__ = ["ScriptedJudgeClient"]


class ScriptedJudgeClient:
    """Answers ``script``'s strings in turn, or ``script(messages)`` for each call.

    Every call's messages are kept in :attr:`calls`, so a test can check what the judge
    was shown. Running out of answers is a :class:`JudgeCallError` (a test asked more
    than it scripted)."""

    def __init__(self, script: Sequence[str] | Callable[[Sequence[Message]], str]) -> None:
        self._script = script
        self._next = 0
        self.calls: list[list[Message]] = []

    @property
    def description(self) -> str:
        return "scripted"

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> JudgeReply:
        self.calls.append([dict(m) for m in messages])
        if callable(self._script):
            return JudgeReply(self._script(messages), "scripted")
        if self._next >= len(self._script):
            raise JudgeCallError(f"the scripted judge has no answer left (it had {len(self._script)})")
        text = self._script[self._next]
        self._next += 1
        return JudgeReply(text, "scripted")
