"""An engine whose model "writes" a given text: the completions route answers with
``reply`` (tokenized with a real tokenizer, ids and logprobs like the local engine), so
tests can put hand-written model outputs behind the gateway's chat templating and
tool-call parsing. It records the prompts it was sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentbolt.engines.engine import Engine


class ScriptedEngine(Engine):
    """Answers every completion with the next of ``replies`` (the last one repeats)."""

    name = "scripted"
    returns_token_ids = True

    def __init__(self, tokenizer: Any, replies: list[str], *, tool_parser: str | None = None,
                 chunk_chars: int = 3, eos: bool = True) -> None:
        self.tokenizer = tokenizer
        self.tool_parser = tool_parser
        self.replies = list(replies)
        self.chunk_chars = chunk_chars
        self.eos = eos  # False: the model was cut at max_tokens (no end-of-turn token sampled)
        self.prompts: list[list[int]] = []
        self.bodies: list[dict[str, Any]] = []

    def _next(self, body: dict[str, Any]) -> tuple[list[int], str, list[int]]:
        prompt = body["prompt"]
        assert isinstance(prompt, list) and all(isinstance(t, int) for t in prompt), "the gateway sends token ids"
        self.prompts.append(prompt)
        self.bodies.append(body)
        text = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return prompt, text, [*ids, self.tokenizer.eos_token_id] if self.eos else ids

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        prompt, text, ids = self._next(body)
        lp = None
        if body.get("logprobs") is not None:
            tokens = [self.tokenizer.decode([t]) for t in ids]
            lp = {"tokens": tokens, "token_logprobs": [-0.5] * len(ids), "top_logprobs": [{} for _ in ids],
                  "text_offset": list(range(len(ids)))}
        return {"id": "cmpl-scripted", "object": "text_completion", "created": 1, "model": "scripted",
                "choices": [{"index": 0, "text": text, "logprobs": lp, "finish_reason": "stop" if self.eos else "length",
                             "token_ids": ids}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids),
                          "total_tokens": len(prompt) + len(ids)},
                "prompt_token_ids": prompt, "policy_version": 1}

    async def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        full = await self.completions(body, replica=replica)
        text, ids = full["choices"][0]["text"], full["choices"][0]["token_ids"]
        pieces = [text[i:i + self.chunk_chars] for i in range(0, len(text), self.chunk_chars)]
        base = {"id": "cmpl-scripted", "object": "text_completion", "created": 1, "model": "scripted"}
        n = len(pieces)
        for i, piece in enumerate(pieces):  # token ids and logprobs spread over the pieces
            token_ids = ids[i * len(ids) // n:(i + 1) * len(ids) // n]
            lp = {"tokens": ["x"] * len(token_ids), "token_logprobs": [-0.5] * len(token_ids),
                  "top_logprobs": [{} for _ in token_ids], "text_offset": [0] * len(token_ids)}
            chunk = {**base, "choices": [{"index": 0, "text": piece, "token_ids": token_ids,
                                          "logprobs": lp if body.get("logprobs") is not None else None,
                                          "finish_reason": "stop" if i == len(pieces) - 1 else None}]}
            if i == 0:
                chunk["prompt_token_ids"] = full["prompt_token_ids"]
            yield chunk
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**base, "choices": [], "usage": full["usage"]}

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        raise AssertionError("the gateway answers chat through the completions route for engines with a tokenizer")

    def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        raise AssertionError("the gateway answers chat through the completions route for engines with a tokenizer")

    async def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "agentbolt"}]}
