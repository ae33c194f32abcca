"""Acceptance: an async agent (openai.AsyncOpenAI: a streamed chat call and a text
completion), 32 rollouts at once as tasks on one event loop, emitting named rewards."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
from fakes.openai_server import FakeOpenAI

from agentbolt.adapters import MessagesAdapter, TripletAdapter, require_token_ids
from agentbolt.runner import rollout
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import emit_reward
from agentbolt.types import LLM

from .checks import (
    N_ROLLOUTS,
    check_attribution,
    check_tokens,
    run_rollouts,
    server_requests,
    task_ids,
)


def make_agent(barrier: asyncio.Barrier) -> Any:
    @rollout
    async def stream_then_complete(task: dict[str, Any], llm: LLM) -> None:
        tag = f"[{task['id']}]"
        async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key, max_retries=0) as client:
            stream = await client.chat.completions.create(
                model=llm.model,
                messages=[{"role": "user", "content": f"{tag} stream this"}],
                stream=True,
                stream_options={"include_usage": True},
                logprobs=True,
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            await barrier.wait()
            done = await client.completions.create(model=llm.model, prompt=f"{tag} {text}", logprobs=1, max_tokens=64)
        exact = float(text == f"echo: {tag} stream this")
        emit_reward({"exact": exact, "length": len(done.choices[0].text) / 100}, primary="exact")

    return stream_then_complete


async def test_async_agent(store: MemoryStore, fake_openai: FakeOpenAI) -> None:
    inputs = [{"id": tid} for tid in task_ids("as")]
    rollouts = await run_rollouts(make_agent(asyncio.Barrier(N_ROLLOUTS)), store, fake_openai, inputs)
    recorded = await check_attribution(store, rollouts, calls_per_rollout=2)
    assert len(server_requests(fake_openai, "as")) == 2 * N_ROLLOUTS

    for rec in recorded:
        tag = f"[{rec.task_id}]"
        assert rec.rollout.reward == 1.0  # the primary of the named rewards
        (reward,) = [s for s in rec.spans if s.name == "agentbolt.reward"]
        assert reward.attributes["agentbolt.reward.primary"] == "exact"
        assert reward.attributes["agentbolt.rewards.length"] > 0

        chat, completion = rec.calls
        assert chat.operation == "chat" and chat.request["stream"] is True
        assert chat.response_text == f"echo: {tag} stream this"  # reassembled from the chunks
        assert completion.operation == "text_completion"
        assert completion.prompt == f"{tag} echo: {tag} stream this"
        for call in rec.calls:
            check_tokens(fake_openai, call)
        assert completion.response_logprobs is not None and len(completion.response_logprobs) == len(
            completion.response_token_ids or []
        )

        triplets = require_token_ids(TripletAdapter(reward_rule="preceding").adapt(rec.spans))
        assert [t.reward for t in triplets] == [None, 1.0]  # the reward followed the completion
        assert triplets[1].prompt.text == completion.prompt and triplets[1].prompt.messages is None
        assert len(MessagesAdapter().adapt(rec.spans)) == 1  # the completion is not chat data
