"""v0.3's LLM proxy answers a call outside any rollout (``http://host:port/v1/...``): the
call goes to the upstream and is recorded nowhere; a call under a rollout's URL is
recorded as that attempt's span, one per call."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp

import agentbolt.compat as agl


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        return response.status, await response.json()


async def test_unscoped_calls_are_answered_and_scoped_ones_recorded(openai_script: Any) -> None:
    upstream = openai_script(lambda body: "hello from upstream")
    store = agl.InMemoryLightningStore()
    port = _free_port()
    proxy = agl.LLMProxy(port=port, store=store,
                         model_list=[{"model_name": "m", "litellm_params": {"model": "openai/m"}}])
    await proxy.start()
    try:
        request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        status, body = await _post(f"http://127.0.0.1:{port}/v1/chat/completions", request)
        assert status == 200 and body["choices"][0]["message"]["content"] == "hello from upstream"

        started = await store.start_rollout(input=1)
        scoped = f"http://127.0.0.1:{port}/rollout/{started.rollout_id}/attempt/{started.attempt.attempt_id}/v1"
        status, _ = await _post(f"{scoped}/chat/completions", request)
        assert status == 200
        calls: list[Any] = []
        for _ in range(100):  # the gateway stores its spans in the background
            calls = [s for s in await store.query_spans(started.rollout_id) if "gen_ai.request.model" in s.attributes]
            if calls:
                break
            await asyncio.sleep(0.05)
        assert len(calls) == 1
        assert len(upstream.calls) == 2
        assert [r.rollout_id for r in await store.query_rollouts()] == [started.rollout_id]  # nothing else
    finally:
        await proxy.stop()
