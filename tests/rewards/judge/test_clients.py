"""The judge clients speak each endpoint's own protocol over real HTTP (a local stand-in
for OpenAI's and Anthropic's servers), retry what is worth retrying, fail with the
endpoint's message otherwise, and the run's own engine answers without the gateway."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agentbolt.rewards.judge import (
    AnthropicJudgeClient,
    EngineJudgeClient,
    JudgeCallError,
    OpenAIJudgeClient,
)

MESSAGES = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Score this."}]


class Endpoint:
    """What the stand-in server got, and what it answers next (status codes to send first)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.fail_first: list[int] = []
        self.url = ""


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint()
    app = FastAPI()

    async def record(request: Request) -> JSONResponse | None:
        state.requests.append((request.url.path, dict(request.headers), await request.json()))
        if state.fail_first:
            code = state.fail_first.pop(0)
            return JSONResponse({"error": {"message": f"planned {code}"}}, status_code=code)
        return None

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        return await record(request) or {"model": "judge-1", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": '{"score": 1}'}, "finish_reason": "stop"}]}

    @app.post("/v1/messages")
    async def messages(request: Request) -> Any:
        return await record(request) or {"model": "claude-x", "content": [{"type": "text", "text": '{"score": '},
                                                                          {"type": "text", "text": "0.5}"}]}

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the stand-in endpoint did not start"
        time.sleep(0.01)
    state.url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    yield state
    server.should_exit = True
    thread.join(timeout=10)


async def test_openai_compatible_judge_posts_a_greedy_chat_completion_with_its_key(endpoint: Endpoint) -> None:
    client = OpenAIJudgeClient("judge-1", base_url=endpoint.url + "/v1", api_key="sk-test", retries=0)
    reply = await client.complete(MESSAGES, max_tokens=64)
    assert (reply.text, reply.model) == ('{"score": 1}', "judge-1")
    ((path, headers, body),) = endpoint.requests
    assert path == "/v1/chat/completions" and headers["authorization"] == "Bearer sk-test"
    assert body == {"model": "judge-1", "messages": MESSAGES, "max_tokens": 64, "temperature": 0.0}
    assert "sk-test" not in client.description


async def test_anthropic_judge_sends_the_system_prompt_apart_and_joins_the_text_blocks(endpoint: Endpoint) -> None:
    client = AnthropicJudgeClient("claude-x", base_url=endpoint.url, api_key="ak-test", retries=0)
    reply = await client.complete(MESSAGES, max_tokens=32)
    assert (reply.text, reply.model) == ('{"score": 0.5}', "claude-x")
    ((path, headers, body),) = endpoint.requests
    assert path == "/v1/messages" and headers["x-api-key"] == "ak-test" and headers["anthropic-version"]
    assert body["system"] == "You judge." and body["messages"] == [{"role": "user", "content": "Score this."}]
    assert body["max_tokens"] == 32


async def test_overload_is_retried_and_a_client_error_is_not(endpoint: Endpoint) -> None:
    client = OpenAIJudgeClient("judge-1", base_url=endpoint.url + "/v1", retries=2, backoff=0.01)
    endpoint.fail_first = [429, 503]
    assert (await client.complete(MESSAGES, max_tokens=8)).text == '{"score": 1}'
    assert len(endpoint.requests) == 3

    endpoint.fail_first = [400]
    with pytest.raises(JudgeCallError, match=r"HTTP 400.*planned 400") as caught:
        await client.complete(MESSAGES, max_tokens=8)
    assert caught.value.status_code == 400 and not caught.value.retryable and len(endpoint.requests) == 4


async def test_an_unreachable_judge_says_so() -> None:
    with pytest.raises(JudgeCallError, match="did not answer"):
        await OpenAIJudgeClient("m", base_url="http://127.0.0.1:9/v1", retries=0).complete(MESSAGES, max_tokens=8)


def test_a_rollouts_gateway_url_is_refused_as_a_judge() -> None:
    with pytest.raises(ValueError, match="trained on"):
        OpenAIJudgeClient("m", base_url="http://127.0.0.1:8000/rollout/ro-1/attempt/at-1/v1")


async def test_the_runs_own_engine_answers_directly() -> None:
    pytest.importorskip("torch")
    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.models import tiny_model

    model, tokenizer = tiny_model(seed=0, vocab="bytes", hidden=32, n_layers=1)
    engine = TransformersEngine(model, tokenizer, max_batch_size=1, num_threads=1)
    reply = await EngineJudgeClient(engine).complete(MESSAGES, max_tokens=4)
    assert isinstance(reply.text, str) and EngineJudgeClient(engine).description == "engine transformers"
