"""Run many rollouts through the real Runner and check, rollout by rollout, that what
was recorded belongs to it and matches what the fake server answered."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from fakes.openai_server import FakeOpenAI

from agentbolt.adapters import ModelCall, extract_model_calls
from agentbolt.runner import Runner
from agentbolt.store.base import Store
from agentbolt.types import LLM, Rollout, RolloutStatus, Span

N_ROLLOUTS = 32
TAG = re.compile(r"\[([a-z]+-\d{2})\]")
"""Every task id is written as ``[xx-07]`` into the agent's prompts."""


def task_ids(prefix: str, n: int = N_ROLLOUTS) -> list[str]:
    return [f"{prefix}-{i:02d}" for i in range(n)]


async def run_rollouts(agent: Any, store: Store, fake: FakeOpenAI, inputs: Sequence[Any]) -> list[Rollout]:
    """Publish the fake server as the LLM resource, enqueue one rollout per input and
    run them all at once (concurrency = number of rollouts) with a real Runner."""
    await store.add_resources({"llm": LLM(endpoint=str(fake), model="fake-model", api_key="test")})
    queued = [await store.enqueue_rollout(item) for item in inputs]
    stats = await Runner(agent, store=store, concurrency=len(inputs), heartbeat_interval=1.0).run(stop_when_idle=True)
    assert (stats.claimed, stats.failed, stats.stopped) == (len(inputs), 0, 0), stats
    return [await store.get_rollout(r.rollout_id) for r in queued]


@dataclass
class Recorded:
    rollout: Rollout
    task_id: str
    spans: list[Span]
    calls: list[ModelCall]


async def check_attribution(store: Store, rollouts: Sequence[Rollout], calls_per_rollout: int) -> list[Recorded]:
    """Every rollout succeeded; its spans form one trace under its root span; every
    model call in it mentions its task id and no other."""
    out = []
    for rollout in rollouts:
        assert rollout.status == RolloutStatus.SUCCEEDED, rollout
        tid = rollout.input["id"]
        spans = await store.get_spans(rollout.rollout_id)
        (root,) = [s for s in spans if s.name == "agentbolt.rollout"]
        by_id = {s.span_id: s for s in spans}
        for s in spans:
            assert (s.rollout_id, s.attempt_id) == (rollout.rollout_id, rollout.latest_attempt_id)
            assert s.attributes["agentbolt.rollout_id"] == rollout.rollout_id
            assert s.trace_id == root.trace_id, f"span {s.name} is not in the trace of {tid}"
            top = s
            while top.parent_id is not None:
                top = by_id[top.parent_id]
            assert top is root, f"span {s.name} of {tid} does not descend from its rollout's root span"
        calls = extract_model_calls(spans)
        assert len(calls) == calls_per_rollout, f"{tid}: {len(calls)} model calls recorded"
        for call in calls:
            assert set(TAG.findall(str(call.request))) == {tid}, f"a model call of {tid} is someone else's"
        out.append(Recorded(rollout, tid, spans, calls))
    return out


def server_requests(fake: FakeOpenAI, prefix: str) -> list[dict[str, Any]]:
    """The bodies the fake server got for the tasks whose ids start with ``prefix``."""
    return [r.body for r in list(fake.requests) if isinstance(r.body, dict) and f"[{prefix}-" in str(r.body)]


def ask_again(fake: FakeOpenAI, request: dict[str, Any]) -> dict[str, Any]:
    """What the (deterministic) server answers to ``request``, without streaming."""
    path = "/completions" if "prompt" in request else "/chat/completions"
    body = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
    response = httpx.post(f"{fake}{path}", json=body, timeout=10)
    response.raise_for_status()
    return response.json()


def check_tokens(fake: FakeOpenAI, call: ModelCall) -> None:
    """The call's token ids and logprobs are exactly the server's."""
    answer = ask_again(fake, call.request)
    choice = answer["choices"][0]
    assert call.token_ids_source == "engine"
    assert call.prompt_token_ids == answer["prompt_token_ids"]
    assert call.response_token_ids == choice["token_ids"]
    logprobs = choice.get("logprobs")
    if logprobs is None:
        assert call.response_logprobs is None
    elif "content" in logprobs:
        assert call.response_logprobs == [t["logprob"] for t in logprobs["content"]]
    else:
        assert call.response_logprobs == logprobs["token_logprobs"]
