"""Chat-message records for supervised fine-tuning, in OpenAI's JSONL format.

::

    records = MessagesAdapter(agent_match="solver", min_reward=1.0).adapt(spans)
    to_jsonl(records, "solver-sft.jsonl")

One record per successful chat model call — the request's messages followed by the
assistant's answer (with its ``tool_calls``), and the ``tools`` the model was offered::

    {"messages": [{"role": "system", ...}, {"role": "user", ...}, {"role": "assistant", ...}],
     "tools": [{"type": "function", "function": {...}}]}

``tools`` is left out when the call offered none. Assistant messages that were already
in the request (earlier turns) get ``"weight": 0`` — OpenAI's way to say "context, do
not train on it" — since each earlier turn is a record of its own (or another agent's
turn); pass ``train_on_history=True`` to leave them unweighted. Messages are reduced to
the fields of the format (``role``, ``content``, ``name``, ``tool_calls``,
``tool_call_id``, ``weight``); ``None`` fields are dropped, except an assistant's
``content`` next to ``tool_calls``.

Text completions (``prompt``, not ``messages``) are not chat data and are skipped: use
:class:`~agentbolt.adapters.TripletAdapter` for them. ``min_reward`` keeps only calls
whose reward (under ``reward_rule``, default ``"final"``) is at least that — calls
with no reward are dropped then — for rejection-sampling fine-tuning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from agentbolt.adapters.calls import ModelCall, extract_model_calls, group_by_attempt
from agentbolt.adapters.match import AgentMatcher, agent_matcher
from agentbolt.adapters.rewards import RewardRule, assign_rewards, check_reward_rule
from agentbolt.types import Span

__all__ = ["ChatRecord", "MessagesAdapter", "to_jsonl"]

ChatRecord = dict[str, Any]
"""``{"messages": [...], "tools": [...]}`` — one line of an OpenAI chat fine-tuning file."""

_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id", "weight")


class MessagesAdapter:
    """Spans → OpenAI chat fine-tuning records (see the module doc)."""

    def __init__(
        self,
        agent_match: str | re.Pattern[str] | AgentMatcher | None = None,
        min_reward: float | None = None,
        *,
        reward_rule: RewardRule = "final",
        train_on_history: bool = False,
    ) -> None:
        self.matcher = agent_matcher(agent_match)
        self.min_reward = min_reward
        self.reward_rule: RewardRule = check_reward_rule(reward_rule)
        self.train_on_history = train_on_history

    def __call__(self, spans: Iterable[Span]) -> list[ChatRecord]:
        return self.adapt(spans)

    def adapt(self, spans: Iterable[Span]) -> list[ChatRecord]:
        """One record per selected chat call of every attempt in ``spans``."""
        out: list[ChatRecord] = []
        for group in group_by_attempt(spans):
            out.extend(self._adapt_attempt(group))
        return out

    def _adapt_attempt(self, spans: Sequence[Span]) -> list[ChatRecord]:
        calls = [c for c in extract_model_calls(spans) if not c.failed]
        rewards = assign_rewards(calls, spans, self.reward_rule)
        records = []
        for call, reward in zip(calls, rewards, strict=True):
            if call.messages is None or call.response_message is None or not self.matcher(call.agent_name):
                continue
            if self.min_reward is not None and (reward is None or reward < self.min_reward):
                continue
            records.append(self.record(call))
        return records

    def record(self, call: ModelCall) -> ChatRecord:
        """The record of one chat call."""
        messages = [_clean(m, history=not self.train_on_history) for m in call.messages or []]
        answer = dict(call.response_message or {})
        answer["role"] = "assistant"
        messages.append(_clean(answer, history=False))
        record: ChatRecord = {"messages": messages}
        if call.tools:
            record["tools"] = call.tools
        return record


def _clean(message: Mapping[str, Any], *, history: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in _MESSAGE_KEYS:
        value = message.get(key)
        if key == "tool_calls":
            value = [_clean_tool_call(c) for c in value or [] if isinstance(c, dict)] or None
        if value is not None:
            out[key] = value
    if "content" not in out and message.get("role") == "assistant":
        out["content"] = None
    if history and out.get("role") == "assistant" and "weight" not in out:
        out["weight"] = 0
    return out


def _clean_tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    given = call.get("function")
    function: dict[str, Any] = given if isinstance(given, dict) else {}
    out: dict[str, Any] = {
        "id": call.get("id"),
        "type": call.get("type") or "function",
        "function": {"name": function.get("name"), "arguments": function.get("arguments")},
    }
    return out


def to_jsonl(records: Iterable[Mapping[str, Any]], path: str | os.PathLike[str]) -> int:
    """Write ``records`` to ``path``, one JSON object per line (UTF-8), creating its
    folder if needed. Returns how many were written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with target.open("wb") as f:
        for record in records:
            f.write(orjson.dumps(record))
            f.write(b"\n")
            n += 1
    return n
