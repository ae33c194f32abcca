"""The local transformers engine answers tool-using chat calls by itself (engine_app, the
admin route): tools reach the prompt, tool_choice forces a call's start, and what a random
tiny model writes — not a readable call — comes back as text, streamed or not."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("torch", reason="the transformers engine needs torch")
pytest.importorskip("transformers", reason="the transformers engine needs transformers")

from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.models import CHATML_TEMPLATE, tiny_model

TOOLS = [{"type": "function", "function": {"name": "calculate", "description": "Evaluate arithmetic",
                                           "parameters": {"type": "object",
                                                          "properties": {"expression": {"type": "string"}}}}}]
BODY = {"messages": [{"role": "user", "content": "What is 3 * 4?"}], "tools": TOOLS, "max_tokens": 12,
        "temperature": 0, "logprobs": True}


async def _run(engine: TransformersEngine, body: dict) -> tuple[dict, list[dict]]:  # type: ignore[type-arg]
    await engine.start()
    try:
        answer = await engine.chat_completions(body)
        chunks = [c async for c in engine.stream_chat_completions({**body, "stream": True})]
        return answer, chunks
    finally:
        await engine.close()


def test_tools_and_tool_choice_on_the_local_engine() -> None:
    model, tokenizer = tiny_model(seed=0)
    engine = TransformersEngine(model, tokenizer, default_max_tokens=12, tool_parser="xlam")
    body = {**BODY, "tool_choice": {"type": "function", "function": {"name": "calculate"}}}
    answer, chunks = asyncio.run(_run(engine, body))
    prompt = tokenizer.decode(answer["prompt_token_ids"])
    assert '"name": "calculate"' in prompt and "Evaluate arithmetic" in prompt  # described in the system prompt
    assert prompt.endswith('<|im_start|>assistant\n<tool_call>[{"name": "calculate", "arguments": ')
    choice = answer["choices"][0]
    # a random model does not finish the call: its text (after the forced start) is the content
    assert choice["message"]["content"].startswith('<tool_call>[{"name": "calculate", "arguments": ')
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] in ("stop", "length")
    assert len(choice["logprobs"]["content"]) == len(choice["token_ids"]) >= 1
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert streamed == choice["message"]["content"]  # temperature 0: the same answer
    ids = [t for c in chunks if c["choices"] for t in c["choices"][0].get("token_ids", [])]
    assert ids == choice["token_ids"]


def test_the_default_parser_comes_from_the_chat_template() -> None:
    model, tokenizer = tiny_model(seed=0)
    tokenizer.chat_template = CHATML_TEMPLATE
    assert TransformersEngine(model, tokenizer).tool_parser == "hermes"  # plain ChatML: no hint in the template
    tokenizer.chat_template = "{# SmolLM #}" + CHATML_TEMPLATE  # SmolLM2's names its model
    assert TransformersEngine(model, tokenizer).tool_parser == "xlam"
    with pytest.raises(ValueError, match="unknown tool-call parser"):
        TransformersEngine(model, tokenizer, tool_parser="pythonic_v9")
