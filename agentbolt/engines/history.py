"""Token-exact history: build a call's prompt from the attempt's earlier calls.

An agent sends its conversation back with every call. Re-rendering the model's earlier
answers from their text can give other tokens than the ones the model sampled (a
template trims or re-spaces; a framework re-serialises tool-call JSON), and every such
difference splits the rollout into separate training samples. So when a call's messages
begin with an earlier call of the same attempt — that call's messages, then the answer
the gateway gave it — its prompt is that call's prompt ids + the ids the engine sampled +
the new turns rendered by the template. Merging into samples by exact token prefix
(:mod:`agentbolt.adapters.samples`) then holds by construction.

Matching compares what the template would see: roles, text content (stripped), tool
calls by name and JSON-decoded arguments (ids and key order do not matter), tool results.
A call that holds assistant turns but continues none of the attempt's earlier calls (an
agent that edited or truncated its history) is rendered from text: the fallback, counted.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from agentbolt.engines.tools.base import call_arguments, call_name

__all__ = ["AttemptHistory", "HistoryStats", "Turn", "message_key"]


def message_key(message: dict[str, Any]) -> str:
    """What of a message reaches the template, as a comparable string."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    calls = [[call_name(c), call_arguments(c)] for c in message.get("tool_calls") or () if isinstance(c, dict)]
    key = [message.get("role"), (content or "").strip(), calls, message.get("name")]
    return json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class Turn:
    """One finished call: its messages, the answer given, and the engine's token ids."""

    messages: tuple[str, ...]
    """:func:`message_key` of each request message."""
    answer: str
    """:func:`message_key` of the assistant message returned."""
    mode_key: str
    """What of the tools changed the prompt (:meth:`ToolMode.key`)."""
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]

    @property
    def length(self) -> int:
        """How many messages a continuing call starts with (its messages + the answer)."""
        return len(self.messages) + 1


@dataclass
class HistoryStats:
    """How prompts were built: from token history, re-rendered (fallback), or fresh."""

    token_exact: int = 0
    rerendered: int = 0
    fresh: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"token_exact": self.token_exact, "rerendered": self.rerendered, "fresh": self.fresh}


@dataclass
class AttemptHistory:
    """The finished calls of recent attempts (``max_attempts`` kept, oldest dropped)."""

    max_attempts: int = 10_000
    max_turns: int = 64
    stats: HistoryStats = field(default_factory=HistoryStats)
    _turns: OrderedDict[tuple[str, str], list[Turn]] = field(default_factory=OrderedDict)

    def remember(self, attempt: tuple[str, str], turn: Turn) -> None:
        turns = self._turns.get(attempt)
        if turns is None:
            if len(self._turns) >= self.max_attempts:
                self._turns.popitem(last=False)
            turns = self._turns[attempt] = []
        else:
            self._turns.move_to_end(attempt)
        turns.append(turn)
        del turns[: -self.max_turns]

    def find(self, attempt: tuple[str, str], keys: list[str], mode_key: str) -> Turn | None:
        """The longest earlier call that ``keys`` (the new call's :func:`message_key`
        list) continues with at least one new message after it, else None."""
        best: Turn | None = None
        for turn in self._turns.get(attempt, ()):
            n = len(turn.messages)
            if (
                turn.mode_key == mode_key
                and len(keys) > turn.length
                and tuple(keys[:n]) == turn.messages
                and keys[n] == turn.answer
                and (best is None or turn.length > best.length)
            ):
                best = turn
        return best

    def count(self, attempt: tuple[str, str], keys: list[str], found: Turn | None) -> str:
        """Count how this call's prompt is built and name it: ``token_exact``,
        ``rerendered`` (it holds assistant turns after earlier calls of the attempt, but
        continues none of them) or ``fresh``."""
        if found is not None:
            self.stats.token_exact += 1
            return "token_exact"
        has_assistant = any(json.loads(k)[0] == "assistant" for k in keys)
        if has_assistant and self._turns.get(attempt):
            self.stats.rerendered += 1
            return "rerendered"
        self.stats.fresh += 1
        return "fresh"
