"""vLLM given the policy's tokenizer: the gateway templates chat calls itself, sends token
ids to vLLM's ``/v1/completions`` and parses tool calls — tested against a fake that
answers a token-id completions request in vLLM's format (``choices[i].prompt_token_ids``,
``choices[i].token_ids``, completions logprobs; streams with per-chunk ids)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from agentbolt.engines import EngineSpec
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.memory import MemoryStore
from gateway.conftest import ADMIN, GatewayWorld

TOKENIZER = byte_tokenizer()
REPLY = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


class FakeVLLMCompletions:
    """vLLM's /v1/completions for a token-id prompt (the reply is fixed)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.app = Starlette(routes=[Route("/v1/completions", self.completions, methods=["POST"]),
                                     Route("/v1/models", self.models)])

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "Qwen/Qwen2.5-0.5B-Instruct", "object": "model"}]})

    async def completions(self, request: Request) -> Any:
        body = await request.json()
        self.seen.append(body)
        prompt = body["prompt"]
        if not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            return JSONResponse({"error": {"message": "expected token ids", "type": "BadRequestError",
                                           "param": None, "code": 400}}, status_code=400)
        ids = [*TOKENIZER(REPLY, add_special_tokens=False)["input_ids"], TOKENIZER.eos_token_id]
        tokens = [TOKENIZER.decode([t]) for t in ids]
        if body.get("stream"):
            return StreamingResponse(self._stream(prompt, ids, tokens), media_type="text/event-stream")
        return JSONResponse({
            "id": "cmpl-1", "object": "text_completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "text": REPLY, "finish_reason": "stop", "stop_reason": None,
                         "prompt_logprobs": None, "prompt_token_ids": prompt, "token_ids": ids,
                         "logprobs": {"tokens": tokens, "token_logprobs": [-0.1] * len(ids),
                                      "top_logprobs": [{t: -0.1} for t in tokens], "text_offset": [0] * len(ids)}}],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids),
                      "total_tokens": len(prompt) + len(ids)},
        })

    def _stream(self, prompt: list[int], ids: list[int], tokens: list[str]) -> Iterator[bytes]:
        for i, (t, text) in enumerate(zip(ids, tokens, strict=True)):
            choice: dict[str, Any] = {"index": 0, "text": text if t != TOKENIZER.eos_token_id else "",
                                      "token_ids": [t], "finish_reason": "stop" if i == len(ids) - 1 else None,
                                      "logprobs": {"tokens": [text], "token_logprobs": [-0.1],
                                                   "top_logprobs": [{text: -0.1}], "text_offset": [0]}}
            if i == 0:
                choice["prompt_token_ids"] = prompt
            yield b"data: " + json.dumps({"id": "cmpl-1", "object": "text_completion", "created": 1,
                                          "model": "m", "choices": [choice]}).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"


@pytest.fixture
def vworld() -> Iterator[tuple[GatewayWorld, FakeVLLMCompletions]]:
    fake = FakeVLLMCompletions()
    with serve_app_in_thread(fake.app) as vllm_url:
        engine = EngineSpec(kind="vllm", url=vllm_url + "/v1", model="Qwen/Qwen2.5-0.5B-Instruct",
                            tool_parser="hermes").build()
        engine.tokenizer = TOKENIZER  # EngineSpec(tokenizer=<dir or Hub name>) loads one; this test has it in memory
        gateway = Gateway(engine, GatewayConfig(retry_backoff=0.01))
        with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
            world = GatewayWorld(url, engine, gateway)
            yield world, fake
            world.admin.close()


def test_vllm_with_a_tokenizer_gets_token_ids_and_the_gateway_parses_calls(vworld) -> None:  # type: ignore[no-untyped-def]
    world, fake = vworld
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    messages = [{"role": "user", "content": "2 + 3?"}]
    answer = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls[0].function.name == "add"
    sent = fake.seen[-1]
    assert sent["return_token_ids"] is True and sent["logprobs"] == 0 and "messages" not in sent
    assert TOKENIZER.decode(sent["prompt"]).endswith("<|im_start|>assistant\n")
    call = choice.message.tool_calls[0]
    follow = [*messages, {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
              {"role": "tool", "tool_call_id": call.id, "content": "5"}]
    streamed = list(client.chat.completions.create(model="policy", messages=follow, tools=TOOLS, stream=True))
    assert any(c.choices and c.choices[0].delta.tool_calls for c in streamed)
    s1, s2 = world.spans(a.rollout_id, 2)
    p1, sampled = s1["attributes"]["agentbolt.llm.prompt_token_ids"], s1["attributes"]["agentbolt.llm.response_token_ids"]
    assert p1 == fake.seen[0]["prompt"] and sampled[-1] == TOKENIZER.eos_token_id
    assert s1["attributes"]["agentbolt.llm.response_logprobs"] == [-0.1] * len(sampled)
    assert s2["attributes"]["agentbolt.llm.prompt_token_ids"][: len(p1) + len(sampled)] == p1 + sampled
    assert s2["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    assert len(s2["attributes"]["agentbolt.llm.response_token_ids"]) == len(sampled)


def test_the_openai_engine_refuses_a_tokenizer() -> None:
    with pytest.raises(ValueError, match="vllm, sglang and transformers"):
        EngineSpec(kind="openai", url="http://x/v1", tokenizer="smollm2")


def test_the_command_line_passes_the_tool_parser_and_tokenizer() -> None:
    from agentbolt.cli.server_cmd import EngineKind, _gateway_spec

    spec = _gateway_spec(EngineKind.VLLM, ["http://127.0.0.1:8000/v1"], None, None, None, "cpu", None, None,
                         tool_parser="hermes", tokenizer="Qwen/Qwen2.5-0.5B-Instruct")
    assert spec is not None and spec.engine.tool_parser == "hermes"
    assert spec.engine.tokenizer == "Qwen/Qwen2.5-0.5B-Instruct"
    with pytest.raises(ValueError, match="vllm and sglang engines"):
        EngineSpec(kind="transformers", path="smollm2", tokenizer="x")
