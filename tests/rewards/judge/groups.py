"""Finished rollouts in a MemoryStore, with the spans a gateway would have recorded, and a
scripted judge that reads the trajectories out of its prompt the way a model would."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from agentbolt import semconv
from agentbolt.rewards.judge import Message
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, Rollout, Span, SpanStatus

QUESTION = "What is 17 * 3?"


def call_span(rollout_id: str, attempt_id: str, messages: list[dict[str, Any]], answer: str, t: float) -> Span:
    """A model call as the gateway records it (request, response, token ids)."""
    request = {"model": "m", "messages": messages}
    response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                             "finish_reason": "stop"}], "model": "m"}
    return Span(rollout_id=rollout_id, attempt_id=attempt_id, name="chat m", start_time=t, end_time=t + 0.1,
                status=SpanStatus.OK, attributes={
                    semconv.GEN_AI_OPERATION: semconv.CHAT, semconv.LLM_REQUEST: orjson.dumps(request).decode(),
                    semconv.LLM_RESPONSE: orjson.dumps(response).decode(),
                    semconv.LLM_PROMPT_TOKEN_IDS: [1, 2, 3], semconv.LLM_RESPONSE_TOKEN_IDS: [4, 5],
                    semconv.LLM_RESPONSE_LOGPROBS: [-0.5, -0.5], semconv.LLM_TOKEN_IDS_SOURCE: "engine"})


async def finished_group(store: MemoryStore, answers: Sequence[str], *, rewards: Sequence[float | None] | None = None,
                         fail: Sequence[int] = ()) -> list[Rollout]:
    """One rollout per answer, all of the same task: each claimed, one model call
    answering ``QUESTION`` with its answer, its own reward when given, then succeeded
    (or failed, for the indexes in ``fail``)."""
    out = []
    for i, answer in enumerate(answers):
        rollout = await store.enqueue_rollout({"question": QUESTION, "answer": 51}, metadata={"group_id": "g0"})
        claim = await store.claim_rollout("w")
        assert claim is not None and claim.rollout.rollout_id == rollout.rollout_id
        rid, aid = rollout.rollout_id, claim.attempt.attempt_id
        root = Span(rollout_id=rid, attempt_id=aid, name=semconv.ROLLOUT_SPAN, start_time=1.0, end_time=3.0)
        spans = [root, call_span(rid, aid, [{"role": "system", "content": "Answer briefly."},
                                            {"role": "user", "content": QUESTION}], answer, 1.5)]
        if rewards is not None and rewards[i] is not None:
            spans.append(Span(rollout_id=rid, attempt_id=aid, name=semconv.REWARD_SPAN, start_time=2.0,
                              attributes=semconv.reward_span_attributes({"correct": float(rewards[i])}, "correct")))
        await store.add_spans(spans)
        status = AttemptStatus.FAILED if i in fail else AttemptStatus.SUCCEEDED
        await store.update_attempt(rid, aid, status=status)
        out.append(await store.get_rollout(rid))
    return out


_BLOCK = re.compile(r"<<<(DATA-[0-9a-f]+)\n(.*)\n\1>>>", re.DOTALL)


def shown_data(messages: Sequence[Message]) -> dict[str, Any]:
    """The data block of a judge prompt, decoded."""
    match = _BLOCK.search(messages[-1]["content"])
    assert match is not None, messages[-1]["content"]
    data: dict[str, Any] = orjson.loads(match.group(2))
    return data


def last_answer(trajectory: dict[str, Any]) -> str:
    return str(trajectory["conversation"][-1].get("content", ""))


def group_judge_by(score: Callable[[str], float]) -> Callable[[Sequence[Message]], str]:
    """A scripted judge answer: ``score(last answer)`` for every trajectory it is shown."""
    def answer(messages: Sequence[Message]) -> str:
        shown = shown_data(messages)["trajectories"]
        scores = [{"id": label, "score": score(last_answer(t)), "rationale": f"answered {last_answer(t)!r}"}
                  for label, t in shown.items()]
        return "Here are my scores:\n```json\n" + orjson.dumps({"scores": scores}).decode() + "\n```"
    return answer
