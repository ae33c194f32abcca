"""A judge on Anthropic's Messages API (``POST {base_url}/v1/messages``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from agentbolt.rewards.judge.client import JudgeReply, Message
from agentbolt.rewards.judge.errors import JudgeCallError
from agentbolt.rewards.judge.http import post_json

__all__ = ["ANTHROPIC_VERSION", "AnthropicJudgeClient"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent."""


class AnthropicJudgeClient:
    """Claude as the judge. ``api_key`` defaults to ``$ANTHROPIC_API_KEY``; system
    messages become the request's ``system`` field; greedy (``temperature`` 0) unless
    ``sampling`` says otherwise."""

    def __init__(self, model: str, *, base_url: str = "https://api.anthropic.com", api_key: str | None = None,
                 sampling: Mapping[str, Any] | None = None, timeout: float = 120.0, retries: int = 3,
                 backoff: float = 1.0) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self.sampling = {"temperature": 0.0, **dict(sampling or {})}
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    @property
    def description(self) -> str:
        return f"anthropic {self.model} at {self.base_url}"

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> JudgeReply:
        if not self._api_key:
            raise JudgeCallError("the Anthropic judge has no API key: set $ANTHROPIC_API_KEY or pass api_key=")
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        turns = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
        body: dict[str, Any] = {**self.sampling, "model": self.model, "max_tokens": max_tokens, "messages": turns}
        if system:
            body["system"] = system
        headers = {"x-api-key": self._api_key, "anthropic-version": ANTHROPIC_VERSION}
        what = f"the Anthropic judge endpoint {self.base_url}"
        data = await post_json(f"{self.base_url}/v1/messages", body, headers=headers, timeout=self.timeout,
                               retries=self.retries, backoff=self.backoff, what=what)
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise JudgeCallError(f"{what} answered without content: {str(data)[:300]}")
        text = "".join(b["text"] for b in blocks if isinstance(b, Mapping) and isinstance(b.get("text"), str))
        model = data.get("model")
        return JudgeReply(text, model if isinstance(model, str) else None)
