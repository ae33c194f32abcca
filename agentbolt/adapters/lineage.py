"""Lineage: which earlier token sequence of an attempt a model call continues, and why a
new sample starts when it continues none.

A rollout's calls are not one conversation in call order: a main agent and its
sub-agents (Claude Code's Task tool, Codex's multi-agent namespace, opencode's
concurrent title call) interleave their own conversations, and harnesses rewrite the
history of one (context compaction, an edited or dropped turn, reasoning stripped from
later prompts, text re-tokenised). :mod:`.samples` keeps the attempt's sequences so far
(its *drafts*: prompt + answers, each one forward pass) and asks :func:`find_branch`
where each call's prompt token ids stand among **all** of them:

* **extends** — some drafts' tokens are an exact prefix of the prompt: the call
  continues the longest of them (the latest on a tie), whatever was called in between;
* otherwise a new sample starts, and :func:`break_cause` says why (an :class:`Origin`
  on the sample):

  - ``first`` — the attempt's first call (with token ids);
  - ``new_conversation`` — the prompt shares less than :data:`MIN_DIVERGED_PREFIX`
    tokens with every earlier draft, and not the whole opening prompt of any: a
    conversation of its own (a sub-agent, a title call). Its calls form a new
    *conversation*;
  - ``diverged`` — the prompt shares a long prefix with an earlier draft (at least
    :data:`MIN_DIVERGED_PREFIX` tokens, or that draft's whole opening prompt) and then
    differs: the same conversation with its history rewritten (compaction, an edited or
    dropped turn, stripped reasoning, other tokens for the same text), or a second answer
    drawn from an earlier point. ``diverged_at`` is the first token index where the two
    differ (the shared tokens are ``token_ids[:diverged_at]`` of both), ``diverged_from``
    the span id of the first call of the draft it shares them with (the one sharing the
    most; the latest on a tie). It stays in that draft's conversation, and the update
    runs the shared tokens once (prefix groups, :mod:`agentbolt.training.batch`).

The classes are read from tokens alone, so they name what happened to the tokens, not
the harness's intent: a sub-agent given the same long system prompt as its parent reads
as ``diverged``.

**Sub-agent names.** A call keeps the agent name its spans give it
(:mod:`.calls`). A call without one, in a conversation other than the attempt's first,
is named after its own system prompt: ``subagent-`` and the first 8 hex digits of the
prompt text's SHA-256 (:func:`subagent_name`) — the same name in every rollout of that
sub-agent, so ``agent_match`` can select it (``"^subagent-"``) or leave it out. A call
whose request has no system prompt (the chat ``system``/``developer`` message, the
Messages API's ``system``, the Responses API's ``instructions``) stays unnamed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentbolt.adapters.calls import ModelCall

__all__ = ["BREAK_CAUSES", "MIN_DIVERGED_PREFIX", "SUBAGENT_PREFIX", "Branch", "BreakCause", "Origin",
           "break_cause", "common_prefix", "find_branch", "subagent_name"]

BreakCause = Literal["first", "new_conversation", "diverged"]
"""Why a sample started (see module doc)."""
BREAK_CAUSES: tuple[BreakCause, ...] = ("first", "new_conversation", "diverged")

MIN_DIVERGED_PREFIX = 64
"""A prompt sharing at least this many leading tokens with an earlier draft diverged from
it; fewer (a chat template's header, a date line) is a new conversation — unless they are
that draft's whole opening prompt."""

SUBAGENT_PREFIX = "subagent-"


@dataclass(frozen=True, slots=True)
class Origin:
    """How a sample started: its :data:`BreakCause`, the conversation it belongs to (0:
    the attempt's first; numbered in order of appearance), and for ``diverged`` where and
    from which draft (the span id of that draft's first call)."""

    cause: BreakCause = "first"
    conversation: int = 0
    diverged_from: str | None = None
    diverged_at: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "conversation": self.conversation, "diverged_from": self.diverged_from,
                "diverged_at": self.diverged_at}


@dataclass(frozen=True, slots=True)
class Branch:
    """Where a prompt stands among the drafts: the one it ``extends`` (an index), or else
    the ``nearest`` — the one sharing the longest prefix, ``shared`` tokens (None, 0:
    there is no draft)."""

    extends: int | None
    nearest: int | None = None
    shared: int = 0


def find_branch(prompt: Sequence[int], drafts: Sequence[Sequence[int]]) -> Branch:
    """The draft whose tokens are the longest exact prefix of ``prompt`` (the latest on a
    tie), else the one sharing the longest common prefix with it."""
    prompt = list(prompt)
    best: int | None = None
    for i, tokens in enumerate(drafts):
        n = len(tokens)
        if n <= len(prompt) and (best is None or n >= len(drafts[best])) and prompt[:n] == list(tokens):
            best = i
    if best is not None:
        return Branch(best)
    nearest, shared = None, -1
    for i, tokens in enumerate(drafts):
        n = common_prefix(prompt, tokens)
        if n >= shared:
            nearest, shared = i, n
    return Branch(None, nearest, max(shared, 0))


def break_cause(branch: Branch, opening: int) -> BreakCause:
    """Why a prompt that extends no draft starts a sample; ``opening`` is the length of the
    nearest draft's first prompt."""
    if branch.nearest is None:
        return "first"
    if branch.shared >= MIN_DIVERGED_PREFIX or (opening > 0 and branch.shared >= opening):
        return "diverged"
    return "new_conversation"


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` have in common (slices compared in C, halving)."""
    a, b = list(a), list(b)
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > 1:  # a[:lo] == b[:lo], a[:hi] != b[:hi]
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def subagent_name(call: ModelCall) -> str | None:
    """``subagent-<8 hex>`` from the call's system prompt (None: it has none)."""
    system = _system_prompt(call)
    if not system:
        return None
    return SUBAGENT_PREFIX + hashlib.sha256(system.encode()).hexdigest()[:8]


def _system_prompt(call: ModelCall) -> str | None:
    for key in ("system", "instructions"):  # the Messages API's, the Responses API's
        text = _text(call.request.get(key))
        if text:
            return text
    for message in call.messages or []:
        if message.get("role") in ("system", "developer"):
            return _text(message.get("content"))
    return None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, Mapping)]
        texts = [t for t in parts if isinstance(t, str)]
        return "".join(texts) if texts else None
    return None
