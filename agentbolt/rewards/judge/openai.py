"""A judge on any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, Ollama, a gateway...)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from agentbolt.rewards.judge.client import JudgeReply, Message
from agentbolt.rewards.judge.errors import JudgeCallError
from agentbolt.rewards.judge.http import post_json

__all__ = ["OpenAIJudgeClient"]


class OpenAIJudgeClient:
    """``POST {base_url}/chat/completions`` with ``model``, greedy by default.

    ``api_key`` defaults to ``$OPENAI_API_KEY`` (none is sent when neither is set);
    ``sampling`` adds request fields (``{"temperature": 0.7}``, ``{"seed": 1}``...).

    Do not point it at a rollout's gateway URL: the call would be recorded as one of that
    rollout's model calls and trained on. To judge with the model being trained, use
    :class:`~agentbolt.rewards.judge.engine.EngineJudgeClient`.
    """

    def __init__(self, model: str, *, base_url: str = "https://api.openai.com/v1", api_key: str | None = None,
                 sampling: Mapping[str, Any] | None = None, timeout: float = 120.0, retries: int = 3,
                 backoff: float = 1.0) -> None:
        if "/rollout/" in base_url:
            raise ValueError(
                f"{base_url} is a rollout's gateway URL: judge calls there would be recorded as the rollout's own "
                "model calls and trained on. Judge with EngineJudgeClient(engine) to use the run's engine"
            )
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.sampling = {"temperature": 0.0, **dict(sampling or {})}
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    @property
    def description(self) -> str:
        return f"openai {self.model} at {self.base_url}"

    async def complete(self, messages: Sequence[Message], *, max_tokens: int) -> JudgeReply:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {**self.sampling, "model": self.model, "messages": list(messages), "max_tokens": max_tokens}
        data = await post_json(f"{self.base_url}/chat/completions", body, headers=headers, timeout=self.timeout,
                               retries=self.retries, backoff=self.backoff,
                               what=f"the judge endpoint {self.base_url}")
        return chat_reply(data, what=f"the judge endpoint {self.base_url}")


def chat_reply(data: Mapping[str, Any], *, what: str) -> JudgeReply:
    """The text of choice 0 of a chat completion."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise JudgeCallError(f"{what} answered without choices: {str(data)[:300]}")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, str):
        raise JudgeCallError(f"{what} answered with no text in choice 0: {str(choices[0])[:300]}")
    model = data.get("model")
    return JudgeReply(content, model if isinstance(model, str) else None)
