"""The gateway over real HTTP in front of a fake engine: attribution, auth, recorded
spans, streaming, per-mode sampling, replica stickiness, pause/drain, retries, errors."""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from agentbolt.gateway import GatewayConfig
from gateway.conftest import GatewayWorld
from gateway.fakes import REPLY, FakeEngine

MESSAGES = [{"role": "user", "content": "what is 2 + 2?"}]
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}]


def test_an_unmodified_openai_client_is_answered_and_its_call_recorded(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS, max_tokens=32)
    assert answer.choices[0].message.content == REPLY

    (span,) = world.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    assert span["attempt_id"] == a.attempt_id
    assert span["name"] == "chat policy" and span["kind"] == "client" and span["status"] == "ok"
    request = json.loads(attrs["agentbolt.llm.request"])
    assert request["messages"] == MESSAGES and request["tools"] == TOOLS
    response = json.loads(attrs["agentbolt.llm.response"])
    assert response["choices"][0]["message"]["content"] == REPLY
    assert attrs["agentbolt.llm.prompt_token_ids"] == answer.model_extra["prompt_token_ids"]
    assert "prompt_token_ids" not in response  # stored once: in the attribute, not in the recorded response
    assert attrs["agentbolt.llm.response_token_ids"] == [100, 101, 102, 103]
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.5, -1.5, -2.5, -3.5]
    assert attrs["agentbolt.llm.token_ids_source"] == "engine"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "policy"
    assert attrs["gen_ai.request.max_tokens"] == 32
    assert attrs["gen_ai.response.finish_reasons"] == ["stop"]
    assert attrs["gen_ai.usage.output_tokens"] == 4
    assert attrs["agentbolt.llm.policy_version"] == 1
    assert attrs["agentbolt.llm.engine"] == "fake"
    assert attrs["agentbolt.llm.engine_replica"] == 0
    assert attrs["agentbolt.llm.latency_ms"] >= 0
    assert attrs["http.response.status_code"] == 200
    assert attrs["agentbolt.rollout_id"] == a.rollout_id


def test_the_client_gets_its_logprobs_and_the_span_stores_them_once(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.chat.completions.create(model="policy", messages=MESSAGES, logprobs=True)
    sent = answer.choices[0].logprobs
    assert sent is not None and [e.logprob for e in sent.content or []] == [-0.5, -1.5, -2.5, -3.5]
    assert "".join(e.token for e in sent.content or []) == REPLY  # the engine's entries, as they were
    (span,) = world.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    assert "logprobs" not in json.loads(attrs["agentbolt.llm.response"])["choices"][0]
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.5, -1.5, -2.5, -3.5]


def test_tool_calls_reach_the_agent_and_the_span(world: GatewayWorld, engine: FakeEngine) -> None:
    engine.tool_call = {"name": "add", "arguments": '{"a": 2, "b": 2}'}
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.chat.completions.create(model="policy", messages=MESSAGES, tools=TOOLS)
    assert answer.choices[0].message.tool_calls[0].function.arguments == '{"a": 2, "b": 2}'
    (span,) = world.spans(a.rollout_id, 1)
    response = json.loads(span["attributes"]["agentbolt.llm.response"])
    assert response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "add"
    assert span["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]


def test_completions_and_models(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    answer = client.completions.create(model="policy", prompt="2 + 2 =", max_tokens=4)
    assert answer.choices[0].text == REPLY
    assert [m.id for m in client.models.list()] == ["fake-model"]
    (span,) = world.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    assert attrs["gen_ai.operation.name"] == "text_completion"
    assert attrs["agentbolt.llm.response_token_ids"] == [100, 101, 102, 103]
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.25] * 4
    assert attrs["agentbolt.llm.prompt_token_ids"]


def test_streaming_passes_chunks_through_and_records_the_reassembled_answer(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    chunks = list(client.chat.completions.create(model="policy", messages=MESSAGES, stream=True))
    assert len(chunks) == 5  # role chunk + one per token; the usage chunk the agent did not ask for is held back
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == REPLY

    (span,) = world.spans(a.rollout_id, 1)
    attrs = span["attributes"]
    response = json.loads(attrs["agentbolt.llm.response"])
    assert response["object"] == "chat.completion"
    assert response["choices"][0]["message"] == {"role": "assistant", "content": text}
    assert response["choices"][0]["finish_reason"] == "stop"
    assert attrs["agentbolt.llm.response_token_ids"] == [100, 101, 102, 103]
    assert attrs["agentbolt.llm.response_logprobs"] == [-0.5, -1.5, -2.5, -3.5]
    assert attrs["agentbolt.llm.prompt_token_ids"]
    assert attrs["gen_ai.usage.output_tokens"] == 4  # from the usage chunk the gateway asked for
    assert attrs["agentbolt.llm.streamed"] is True


def test_streamed_completions_are_reassembled(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    text = "".join(c.choices[0].text for c in client.completions.create(model="p", prompt="x", stream=True))
    assert text == REPLY
    (span,) = world.spans(a.rollout_id, 1)
    assert json.loads(span["attributes"]["agentbolt.llm.response"])["choices"][0]["text"] == REPLY
    assert span["attributes"]["agentbolt.llm.response_token_ids"] == [100, 101, 102, 103]


def test_headers_attribute_calls_on_plain_v1(world: GatewayWorld) -> None:
    a = world.claim()
    r = world.admin.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": MESSAGES},
        headers={"X-Agentbolt-Rollout-Id": a.rollout_id, "X-Agentbolt-Attempt-Id": a.attempt_id},
    )
    assert r.status_code == 200
    world.spans(a.rollout_id, 1)


def test_a_scoped_token_alone_attributes_calls_to_its_attempt(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=world.url + "/v1", api_key=a.token)
    client.chat.completions.create(model="m", messages=MESSAGES)
    (span,) = world.spans(a.rollout_id, 1)
    assert span["attempt_id"] == a.attempt_id


def test_a_scoped_token_cannot_call_another_rollouts_url(world: GatewayWorld) -> None:
    mine, other = world.claim(), world.claim()
    client = openai.OpenAI(base_url=other.base_url, api_key=mine.token, max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as err:
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert "scoped to rollout" in err.value.message
    r = httpx.post(
        world.url + "/v1/chat/completions",
        json={"model": "m", "messages": MESSAGES},
        headers={
            "Authorization": f"Bearer {mine.token}",
            "X-Agentbolt-Rollout-Id": other.rollout_id,
            "X-Agentbolt-Attempt-Id": other.attempt_id,
        },
    )
    assert r.status_code == 403 and r.json()["error"]["type"] == "forbidden"
    assert world.engine.calls == []


def test_calls_need_a_token_and_an_attempt(world: GatewayWorld) -> None:
    a = world.claim()
    assert httpx.post(a.base_url + "/chat/completions", json={"messages": MESSAGES}).status_code == 401
    r = world.admin.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert r.status_code == 400 and "X-Agentbolt-Rollout-Id" in r.json()["error"]["message"]
    r = world.admin.post("/rollout/nope/attempt/nope/v1/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert r.status_code == 404
    with world.client(a) as c:
        r = c.post("/chat/completions", content=b"{not json")
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
        assert r.json()["error"]["message"].startswith("the request body is not valid JSON")
        r = c.post("/chat/completions", json=[MESSAGES])
        assert r.status_code == 400 and r.json()["error"]["message"] == "the request body must be a JSON object"


def test_sampling_is_forced_per_mode(world: GatewayWorld, engine: FakeEngine) -> None:
    train, val = world.claim("train"), world.claim("val")
    for a in (train, val):
        with world.client(a) as c:
            c.post(
                "/chat/completions", json={"model": "m", "messages": MESSAGES, "temperature": 0.3}
            ).raise_for_status()
    (train_body, _), (val_body, _) = engine.calls
    assert train_body["temperature"] == 1.0 and val_body["temperature"] == 0.0
    assert train_body["logprobs"] is True and train_body["return_token_ids"] is True
    assert world.spans(val.rollout_id, 1)[0]["attributes"]["gen_ai.request.temperature"] == 0.0


@pytest.mark.parametrize("engine", [FakeEngine(replicas=3)])
def test_a_rollout_sticks_to_one_replica(world: GatewayWorld, engine: FakeEngine) -> None:
    attempts = [world.claim() for _ in range(3)]
    for _ in range(3):
        for a in attempts:
            with world.client(a) as c:
                c.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).raise_for_status()
    replicas = [r for _, r in engine.calls]
    assert replicas == [0, 1, 2] * 3
    assert world.spans(attempts[2].rollout_id, 3)[0]["attributes"]["agentbolt.llm.engine_replica"] == 2


def test_pause_answers_429_while_in_flight_calls_finish(world: GatewayWorld, engine: FakeEngine) -> None:
    a = world.claim()
    engine.gate = threading.Event()
    results: list[int] = []
    with world.client(a) as c:
        slow = threading.Thread(
            target=lambda: results.append(
                c.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code
            )
        )
        slow.start()
        while world.admin.get("/v1/gateway/status").json()["in_flight"] == 0:
            time.sleep(0.01)
        assert world.admin.post("/v1/gateway/pause").json()["paused"] is True
        r = c.post("/chat/completions", json={"model": "m", "messages": MESSAGES})
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "gateway_paused"
        drained: list[dict] = []
        drain = threading.Thread(
            target=lambda: drained.append(world.admin.post("/v1/gateway/pause", params={"drain": True}).json())
        )
        drain.start()
        time.sleep(0.1)
        assert not drained  # still waiting for the call in flight
        engine.gate.set()
        slow.join(10)
        drain.join(10)
        assert results == [200] and drained[0]["in_flight"] == 0
        world.admin.post("/v1/gateway/resume").raise_for_status()
        assert c.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code == 200
    world.spans(a.rollout_id, 2)  # the 429 reached no engine and is not a model call


def test_only_the_admin_may_pause(world: GatewayWorld) -> None:
    a = world.claim()
    r = httpx.post(world.url + "/v1/gateway/pause", headers={"Authorization": f"Bearer {a.token}"})
    assert r.status_code == 403
    assert world.admin.get("/v1/gateway/status").json()["paused"] is False


def test_engine_5xx_and_429_are_retried_with_backoff(world: GatewayWorld, engine: FakeEngine) -> None:
    engine.fail_next = [503, 429]
    a = world.claim()
    with world.client(a) as c:
        assert c.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code == 200
    assert len(engine.calls) == 3
    (span,) = world.spans(a.rollout_id, 1)
    assert span["attributes"]["agentbolt.llm.retries"] == 2


def test_engine_errors_reach_the_agent_as_openai_errors(world: GatewayWorld, engine: FakeEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token, max_retries=0)
    engine.fail_next = [400]
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert err.value.message.endswith("fake engine failure 400") or "fake engine failure 400" in str(err.value)
    assert len(engine.calls) == 1  # a 4xx is not retried
    engine.fail_next = [500, 500, 500]
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=MESSAGES)
    assert len(engine.calls) == 4  # 1 + max_retries (2)
    spans = world.spans(a.rollout_id, 2)
    assert [s["attributes"]["http.response.status_code"] for s in spans] == [400, 500]
    assert all(s["status"] == "error" for s in spans)
    assert json.loads(spans[0]["attributes"]["agentbolt.llm.request"])["messages"] == MESSAGES


@pytest.mark.parametrize("config", [GatewayConfig(request_timeout=0.2, max_retries=1, retry_backoff=0.01)])
def test_an_engine_timeout_is_retried_then_a_504(world: GatewayWorld, engine: FakeEngine) -> None:
    engine.fail_next = [0, 0]  # hang twice
    a = world.claim()
    with world.client(a) as c:
        r = c.post("/chat/completions", json={"model": "m", "messages": MESSAGES})
    assert r.status_code == 504 and "request_timeout" in r.json()["error"]["message"]
    assert len(engine.calls) == 2


def test_a_streaming_error_before_the_first_chunk_gets_a_status(world: GatewayWorld, engine: FakeEngine) -> None:
    engine.fail_next = [404]
    a = world.claim()
    with world.client(a) as c:
        r = c.post("/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True})
    assert r.status_code == 404 and r.json()["error"]["message"] == "fake engine failure 404"


def test_policy_version_is_the_one_that_served(world: GatewayWorld, engine: FakeEngine) -> None:
    a = world.claim()
    with world.client(a) as c:
        c.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).raise_for_status()
        engine.bump()
        c.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).raise_for_status()
    spans = world.spans(a.rollout_id, 2)
    assert [s["attributes"]["agentbolt.llm.policy_version"] for s in spans] == [1, 2]


def test_an_agent_leaving_mid_stream_is_recorded_and_not_left_in_flight(
    world: GatewayWorld, engine: FakeEngine
) -> None:
    engine.stream_gate = threading.Event()
    a = world.claim()
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    with world.client(a) as c, c.stream("POST", "/chat/completions", json=body) as r:
        assert next(r.iter_lines()).startswith("data: ")
    # the connection is closed with the engine still streaming
    engine.stream_gate.set()
    deadline = time.monotonic() + 10
    while world.admin.get("/v1/gateway/status").json()["in_flight"]:
        assert time.monotonic() < deadline, "the abandoned stream is still counted in flight"
        time.sleep(0.02)
    (span,) = world.spans(a.rollout_id, 1)
    assert span["attributes"]["http.response.status_code"] in (200, 499)


def test_with_pause_hold_a_call_arriving_while_paused_waits_for_the_resume(world: GatewayWorld) -> None:
    world.gateway.config.pause_hold_s = 30.0
    a = world.claim()
    assert world.admin.post("/v1/gateway/pause").json()["paused"] is True
    results: list[int] = []
    with world.client(a) as c:
        held = threading.Thread(
            target=lambda: results.append(
                c.post("/chat/completions", json={"model": "m", "messages": MESSAGES}).status_code
            )
        )
        held.start()
        time.sleep(0.3)
        assert not results  # neither answered nor turned away: held
        world.admin.post("/v1/gateway/resume").raise_for_status()
        held.join(10)
    assert results == [200]
