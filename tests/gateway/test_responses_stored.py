"""``GET`` and ``DELETE …/v1/responses/{id}`` at the gateway, called with the real
``openai`` client: a response comes back as it was answered (streamed or not), also when
this process no longer has it (rebuilt from the trace); deleting makes retrieving and
continuing it a 404 in the Responses API's error shape, and leaves the trace alone; an
attempt sees only its own responses; the header form works like POST's."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.models import byte_tokenizer
from gateway.conftest import ADMIN, GatewayWorld
from gateway.scripted_engine import ScriptedEngine

TOOLS = [{"type": "function", "name": "add", "description": "Add two integers",
          "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                         "required": ["a", "b"]}}]
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(byte_tokenizer(), [CALL, "The answer is 5."], tool_parser="hermes")


def test_a_response_is_retrieved_as_it_was_answered(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.responses.create(model="policy", instructions="Use the tools.", input="What is 2 + 3?",
                                    tools=TOOLS, metadata={"case": "1"})
    again = client.responses.retrieve(first.id)
    assert again.model_dump() == first.model_dump()
    streamed = list(client.responses.create(model="policy", previous_response_id=first.id, tools=TOOLS, stream=True,
                                            input=[{"type": "function_call_output",
                                                    "call_id": first.output[0].call_id, "output": "5"}]))
    final = streamed[-1].response
    assert client.responses.retrieve(final.id).model_dump() == final.model_dump()
    assert client.responses.retrieve(final.id).output_text == "The answer is 5."


def test_a_response_this_process_forgot_is_rebuilt_from_the_trace(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.responses.create(model="policy", instructions="Use the tools.", input="What is 2 + 3?",
                                    tools=TOOLS, max_output_tokens=64)
    world.spans(a.rollout_id, 1)
    world.gateway.responses = type(world.gateway.responses)()  # as if another server process had answered it
    rebuilt = client.responses.retrieve(first.id)
    assert rebuilt.id == first.id and rebuilt.status == "completed" and rebuilt.instructions == "Use the tools."
    (call,) = rebuilt.output
    assert call.type == "function_call" and call.call_id == first.output[0].call_id
    assert call.name == "add" and json.loads(call.arguments) == {"a": 2, "b": 3}
    assert rebuilt.usage is not None and first.usage is not None
    assert rebuilt.usage.output_tokens == first.usage.output_tokens
    assert rebuilt.usage.input_tokens == first.usage.input_tokens
    assert [t.name for t in rebuilt.tools] == ["add"] and rebuilt.max_output_tokens == 64
    assert rebuilt.created_at == pytest.approx(first.created_at, abs=5)


def test_deleting_a_response(world: GatewayWorld) -> None:
    a = world.claim()
    with world.client(a) as http:
        first = http.post("/responses", json={"model": "policy", "input": "What is 2 + 3?", "tools": TOOLS}).json()
        gone = http.delete(f"/responses/{first['id']}")
        assert gone.status_code == 200
        assert gone.json() == {"id": first["id"], "object": "response.deleted", "deleted": True}
        missing = http.get(f"/responses/{first['id']}")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "response_not_found"
        assert missing.json()["error"]["type"] == "invalid_request_error"
        assert http.delete(f"/responses/{first['id']}").status_code == 404  # deleting twice
        streamed = http.get(f"/responses/{first['id']}", params={"stream": "true"})
        assert streamed.status_code == 400 and "not served" in streamed.json()["error"]["message"]
        follow = http.post("/responses", json={"model": "policy", "previous_response_id": first["id"],
                                               "input": "and then?"})
        assert follow.status_code == 404 and follow.json()["error"]["code"] == "previous_response_not_found"
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    client.responses.delete(client.responses.create(model="policy", input="hi").id)  # the SDK's own delete call
    assert len(world.spans(a.rollout_id, 2)) == 2  # the trace keeps both calls


def test_unknown_ids_and_other_attempts_are_404(world: GatewayWorld) -> None:
    a, b = world.claim(), world.claim()
    client_a = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    client_b = openai.OpenAI(base_url=b.base_url, api_key=b.token)
    with pytest.raises(openai.NotFoundError) as err:
        client_a.responses.retrieve("resp_unknown")
    assert err.value.code == "response_not_found" and err.value.param == "response_id"
    first = client_a.responses.create(model="policy", input="What is 2 + 3?", tools=TOOLS)
    with pytest.raises(openai.NotFoundError):
        client_b.responses.retrieve(first.id)  # another attempt's response is not this one's
    with pytest.raises(openai.NotFoundError):
        client_b.responses.delete(first.id)
    assert client_a.responses.retrieve(first.id).id == first.id  # b's delete did not touch it
    with httpx.Client(base_url=world.url, timeout=30) as http:  # a's token on b's URL: refused
        r = http.get(f"/rollout/{b.rollout_id}/attempt/{b.attempt_id}/v1/responses/{first.id}",
                     headers={"Authorization": f"Bearer {a.token}"})
        assert r.status_code == 403


def test_header_form(world: GatewayWorld) -> None:
    a = world.claim()
    headers = {"Authorization": f"Bearer {ADMIN}", "X-Agentbolt-Rollout-Id": a.rollout_id,
               "X-Agentbolt-Attempt-Id": a.attempt_id}
    with httpx.Client(base_url=world.url, timeout=30) as http:
        first = http.post("/v1/responses", json={"model": "policy", "input": "hi"}, headers=headers).json()
        got = http.get(f"/v1/responses/{first['id']}", headers=headers)
        assert got.status_code == 200 and got.json() == first
        scoped = http.get(f"/v1/responses/{first['id']}", headers={"Authorization": f"Bearer {a.token}"})
        assert scoped.status_code == 200 and scoped.json()["id"] == first["id"]
        missing = http.get(f"/v1/responses/{first['id']}", headers={"Authorization": f"Bearer {ADMIN}"})
        assert missing.status_code == 400 and missing.json()["error"]["code"] == "missing_rollout"
        assert http.delete(f"/v1/responses/{first['id']}", headers=headers).json()["deleted"] is True
        assert http.get(f"/v1/responses/{first['id']}", headers=headers).status_code == 404
