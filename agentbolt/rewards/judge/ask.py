"""One judge call: send, read the answer, ask again while it is malformed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

from agentbolt.rewards.judge.client import JudgeCall, JudgeClient, Message
from agentbolt.rewards.judge.errors import JudgeError, MalformedJudgeAnswerError

__all__ = ["ask"]

T = TypeVar("T")


async def ask(client: JudgeClient, messages: Sequence[Message], parse: Callable[[str], T], *, max_tokens: int,
              retries: int) -> tuple[T, JudgeCall]:
    """``(parse(answer), the call)``. A malformed answer is asked again up to ``retries``
    times (a sampling judge may do better; a greedy one usually does not); then the last
    :class:`MalformedJudgeAnswerError` is raised, as is any
    :class:`~agentbolt.rewards.judge.errors.JudgeCallError`, with the call on ``.call``."""
    call_id = uuid.uuid4().hex
    start = time.time()
    text, model = "", None
    for attempt in range(1, retries + 2):
        try:
            reply = await client.complete(messages, max_tokens=max_tokens)
            text, model = reply.text, reply.model
            return parse(text), _call(call_id, client, messages, text, model, start, attempt)
        except MalformedJudgeAnswerError as exc:
            if attempt > retries:
                exc.call = _call(call_id, client, messages, text, model, start, attempt)
                raise
        except JudgeError as exc:
            exc.call = _call(call_id, client, messages, text, model, start, attempt)
            raise
    raise AssertionError("unreachable")  # the last pass returns or raises


def _call(call_id: str, client: JudgeClient, messages: Sequence[Message], text: str, model: str | None,
          start: float, attempts: int) -> JudgeCall:
    return JudgeCall(call_id, client.description, [dict(m) for m in messages], text, model, start, time.time(),
                     attempts)
