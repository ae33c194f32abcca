"""Port of v0.3's ``examples/minimal/llm_proxy.py`` (``openai`` and ``test`` modes): serve
an LLM proxy in front of an OpenAI-compatible model, then call it under a rollout's URL
and read the call back as spans. ``import agentlightning as agl`` -> ``import agentbolt as agl``."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

import agentbolt as agl


async def serve_llm_proxy_with_openai(model_name: str, store_port: int, proxy_port: int) -> tuple[Any, Any]:
    store = agl.InMemoryLightningStore()
    store_server = agl.LightningStoreServer(store, "127.0.0.1", store_port)
    await store_server.start()
    llm_proxy = agl.LLMProxy(
        port=proxy_port,
        model_list=[{"model_name": model_name, "litellm_params": {"model": "openai/" + model_name}}],
        store=store_server,
        callbacks=["opentelemetry"],
    )
    await llm_proxy.start()
    return llm_proxy, store_server


async def test_llm_proxy(model_name: str, store_port: int, proxy_port: int) -> tuple[dict[str, Any], list[Any]]:
    store = agl.LightningStoreClient(f"http://localhost:{store_port}")
    rollout = await store.start_rollout(input={"origin": "test_llm_proxy"})
    url = (f"http://localhost:{proxy_port}/rollout/{rollout.rollout_id}/attempt/"
           f"{rollout.attempt.attempt_id}/v1/chat/completions")
    request = {"model": model_name, "messages": [{"role": "user", "content": "Hello, what's your name?"}]}
    async with aiohttp.ClientSession() as session, session.post(url, json=request) as response:
        body = await response.json()
    spans: Any = []
    for _ in range(50):  # the proxy stores its spans in the background, as v0.3's OTLP export did
        spans = await store.query_spans(rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id)
        if spans:
            break
        await asyncio.sleep(0.05)
    await store.close()
    return body, list(spans)
