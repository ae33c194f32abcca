"""Agents of the GRPO tests that runner processes import (module level, no torch)."""

from __future__ import annotations

import asyncio
from typing import Any


async def byte_agent(task: dict[str, Any], llm: Any) -> float:
    """One model call through the gateway; the reward is the answer's first byte, so
    rollouts of one task almost always differ (every group carries signal). The task's
    ``sleep`` / ``sleep_after`` (s) make the rollout last longer before / after the call."""
    import openai

    delay = task.get("sleep")
    if delay:
        await asyncio.sleep(float(delay))
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        answer = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=3)
    text = answer.choices[0].message.content or ""
    if task.get("sleep_after"):
        await asyncio.sleep(float(task["sleep_after"]))
    return ord(text[0]) / 1000 if text else 0.0
