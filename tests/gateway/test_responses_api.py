"""The Responses API at the gateway, called with the real ``openai`` client: function
tools, streaming events, ``previous_response_id`` rebuilding the history into the trace
(token-exact), errors in the API's shape, the header form, and an engine that only
speaks chat."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from gateway.conftest import ADMIN, GatewayWorld
from gateway.fakes import FakeEngine
from gateway.scripted_engine import ScriptedEngine

TOOLS = [{"type": "function", "name": "add", "description": "Add two integers",
          "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                         "required": ["a", "b"]}}]
QUESTION = "What is 2 + 3?"
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(byte_tokenizer(), [CALL, "The answer is 5."], tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(sampling={"train": {"temperature": 1.0}}, retry_backoff=0.01)


def _messages(span: dict) -> list[dict]:  # type: ignore[type-arg]
    return json.loads(span["attributes"]["agentbolt.llm.request"])["messages"]


def test_function_call_then_previous_response_id(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.responses.create(model="policy", instructions="Use the tools.", input=QUESTION, tools=TOOLS)
    assert first.status == "completed" and first.id.startswith("resp_")
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "add" and json.loads(call.arguments) == {"a": 2, "b": 3} and call.call_id.startswith("call_")
    second = client.responses.create(
        model="policy", instructions="Use the tools.", previous_response_id=first.id, tools=TOOLS,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "5"}],
    )
    assert second.output_text == "The answer is 5." and second.previous_response_id == first.id
    assert second.usage.output_tokens == len(engine.tokenizer("The answer is 5.")["input_ids"]) + 1
    s1, s2 = world.spans(a.rollout_id, 2)
    recorded = _messages(s2)  # the whole conversation is in the trace
    assert [m["role"] for m in recorded] == ["system", "user", "assistant", "tool"]
    assert recorded[1]["content"] == QUESTION
    assert recorded[2]["tool_calls"][0]["function"]["name"] == "add" and recorded[3]["content"] == "5"
    for span in (s1, s2):
        attrs = span["attributes"]
        assert attrs["agentbolt.llm.api"] == "responses" and attrs["agentbolt.llm.token_ids_source"] == "engine"
        assert len(attrs["agentbolt.llm.response_logprobs"]) == len(attrs["agentbolt.llm.response_token_ids"])
    assert s1["attributes"]["agentbolt.llm.response_api_id"] == first.id
    assert s2["attributes"]["agentbolt.llm.previous_response_id"] == first.id
    assert s2["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"  # history rebuilt, ids reused
    p1, p2 = engine.prompts
    sampled = s1["attributes"]["agentbolt.llm.response_token_ids"]
    assert p2[: len(p1) + len(sampled)] == p1 + sampled


def test_history_sent_back_as_items_is_token_exact_too(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.responses.create(model="policy", input=QUESTION, tools=TOOLS)
    (call,) = first.output
    items = [{"role": "user", "content": QUESTION}, call.model_dump(exclude_none=True),
             {"type": "function_call_output", "call_id": call.call_id, "output": "5"}]
    client.responses.create(model="policy", input=items, tools=TOOLS)
    assert world.spans(a.rollout_id, 2)[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"


def test_streaming_events(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    events = list(client.responses.create(model="policy", input=QUESTION, tools=TOOLS, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.done" in kinds and "response.output_item.added" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    (call,) = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"a": 2, "b": 3}
    added = next(e for e in events if e.type == "response.output_item.added")
    assert added.item.id == call.id
    text_events = list(client.responses.create(model="policy", previous_response_id=final.id, tools=TOOLS,
                                               stream=True, input=[{"type": "function_call_output",
                                                                    "call_id": call.call_id, "output": "5"}]))
    deltas = "".join(e.delta for e in text_events if e.type == "response.output_text.delta")
    assert deltas == "The answer is 5." and text_events[-1].response.output_text == "The answer is 5."
    spans = world.spans(a.rollout_id, 2)
    assert spans[1]["attributes"]["agentbolt.llm.streamed"] is True
    assert spans[1]["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    assert [m["role"] for m in _messages(spans[1])] == ["user", "assistant", "tool"]


def test_errors_in_the_responses_shape(world: GatewayWorld) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model="policy", input="hi", previous_response_id="resp_unknown")
    assert err.value.code == "previous_response_not_found" and err.value.param == "previous_response_id"
    other = world.claim()  # a response of another attempt is not this attempt's history
    first = client.responses.create(model="policy", input="hi")
    other_client = openai.OpenAI(base_url=other.base_url, api_key=other.token)
    with pytest.raises(openai.NotFoundError):
        other_client.responses.create(model="policy", input="hi", previous_response_id=first.id)


def test_previous_response_is_read_back_from_the_store(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    first = client.responses.create(model="policy", instructions="Be brief.", input=QUESTION, tools=TOOLS)
    world.gateway.responses._items.clear()  # as if another server process had answered it
    (call,) = first.output
    client.responses.create(model="policy", instructions="Be brief.", previous_response_id=first.id, tools=TOOLS,
                            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "5"}])
    recorded = _messages(world.spans(a.rollout_id, 2)[1])
    assert [m["role"] for m in recorded] == ["system", "user", "assistant", "tool"]


def test_header_form(world: GatewayWorld) -> None:
    a = world.claim()
    with httpx.Client(base_url=world.url, timeout=30) as http:
        r = http.post("/v1/responses", json={"model": "policy", "input": QUESTION},
                      headers={"Authorization": f"Bearer {ADMIN}", "X-Agentbolt-Rollout-Id": a.rollout_id,
                               "X-Agentbolt-Attempt-Id": a.attempt_id})
        assert r.status_code == 200 and r.json()["object"] == "response"
        scoped = http.post("/v1/responses", json={"model": "policy", "input": QUESTION},
                           headers={"Authorization": f"Bearer {a.token}"})
        assert scoped.status_code == 200
    world.spans(a.rollout_id, 2)


def test_an_engine_that_only_speaks_chat() -> None:
    engine = FakeEngine()
    engine.tool_call = {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    gateway = Gateway(engine, GatewayConfig(retry_backoff=0.01))
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        world = GatewayWorld(url, engine, gateway)
        a = world.claim()
        client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
        answer = client.responses.create(model="policy", input=QUESTION, tools=TOOLS)
        (call,) = answer.output
        assert call.type == "function_call" and call.call_id == "call_1"
        sent = engine.calls[-1][0]
        assert sent["tools"][0]["function"]["name"] == "add" and sent["messages"][0]["content"] == QUESTION
        events = list(client.responses.create(model="policy", input=QUESTION, tools=TOOLS, stream=True))
        assert events[-1].type == "response.completed"
        world.admin.close()


def test_hosted_tools_are_dropped_and_recorded(world: GatewayWorld, engine: ScriptedEngine) -> None:
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    hosted = [{"type": "web_search", "external_web_access": True}, {"type": "file_search", "vector_store_ids": ["v"]},
              {"type": "mcp", "server_label": "docs", "server_url": "https://example.invalid/mcp"}]
    answer = client.responses.create(model="policy", input=QUESTION, tools=[*TOOLS, *hosted])  # type: ignore[list-item]
    assert answer.status == "completed" and answer.output[0].type == "function_call"
    assert [t.type for t in answer.tools] == ["function", "web_search", "file_search", "mcp"]  # echoed as sent
    (span,) = world.spans(a.rollout_id, 1)
    assert span["attributes"]["agentbolt.llm.dropped_tools"] == ["web_search", "file_search", "mcp:docs"]
    request = json.loads(span["attributes"]["agentbolt.llm.request"])
    assert [t["function"]["name"] for t in request["tools"]] == ["add"]
    assert "web_search" not in engine.tokenizer.decode(engine.prompts[0])
    only_hosted = client.responses.create(model="policy", input="hi", tools=hosted[:1],  # type: ignore[list-item]
                                          tool_choice="auto")
    assert only_hosted.status == "completed"  # no tools left: a plain answer, not a 400
    assert "tools" not in json.loads(world.spans(a.rollout_id, 2)[1]["attributes"]["agentbolt.llm.request"])


NAMESPACE = {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [
    {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent", "strict": False,
     "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}},
    {"type": "function", "name": "add", "description": "Another add", "parameters": {"type": "object"}}]}
SPAWN = '<tool_call>\n{"name": "spawn_agent", "arguments": {"task": "look"}}\n</tool_call>'


def test_namespace_tools_are_flattened_and_calls_mapped_back(world: GatewayWorld, engine: ScriptedEngine) -> None:
    engine.replies = [SPAWN, '<tool_call>\n{"name": "multi_agent_v1__add", "arguments": {}}\n</tool_call>', "ok"]
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    tools = [*TOOLS, NAMESPACE]
    first = client.responses.create(model="policy", input=QUESTION, tools=tools)  # type: ignore[list-item]
    (call,) = first.output
    raw = call.model_dump()
    assert raw["name"] == "spawn_agent" and raw["namespace"] == "multi_agent_v1"
    request = json.loads(world.spans(a.rollout_id, 1)[0]["attributes"]["agentbolt.llm.request"])
    # a name two tools share is told apart by its namespace; the others keep their own
    assert [t["function"]["name"] for t in request["tools"]] == ["add", "spawn_agent", "multi_agent_v1__add"]
    history = [{"role": "user", "content": QUESTION}, call.model_dump(exclude_none=True),
               {"type": "function_call_output", "call_id": call.call_id, "output": "started"}]
    with client.responses.stream(model="policy", input=history, tools=tools) as stream:  # type: ignore[arg-type]
        final = stream.get_final_response()
    (second,) = final.output
    assert second.model_dump()["name"] == "add" and second.model_dump()["namespace"] == "multi_agent_v1"
    s2 = world.spans(a.rollout_id, 2)[1]
    assert s2["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"  # the call sent back renders as sampled
    assert json.loads(s2["attributes"]["agentbolt.llm.request"])["messages"][1]["tool_calls"][0]["function"][
        "name"] == "spawn_agent"


def test_a_responses_websocket_is_refused_with_426(world: GatewayWorld) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    a = world.claim()
    with pytest.raises(InvalidStatus) as refused:
        connect(a.base_url.replace("http://", "ws://") + "/responses",
                additional_headers={"Authorization": f"Bearer {a.token}"})
    assert refused.value.response.status_code == 426
    assert json.loads(refused.value.response.body)["error"]["code"] == "websocket_not_supported"


APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files with a patch.",
               "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" /.+/'}}
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"


@pytest.mark.parametrize("stream", [False, True])
def test_custom_tools_are_one_string_functions(world: GatewayWorld, engine: ScriptedEngine, stream: bool) -> None:
    call_text = '<tool_call>\n' + json.dumps({"name": "apply_patch", "arguments": {"input": PATCH}}) + '\n</tool_call>'
    engine.replies = [call_text, "Patched."]
    a = world.claim()
    client = openai.OpenAI(base_url=a.base_url, api_key=a.token)
    if stream:
        with client.responses.stream(model="policy", input="add a.txt", tools=[APPLY_PATCH]) as events:  # type: ignore[list-item]
            kinds = [e.type for e in events]
            first = events.get_final_response()
        assert "response.custom_tool_call_input.done" in kinds and "response.function_call_arguments.delta" not in kinds
    else:
        first = client.responses.create(model="policy", input="add a.txt", tools=[APPLY_PATCH])  # type: ignore[list-item]
    (call,) = first.output
    assert call.type == "custom_tool_call" and call.name == "apply_patch" and call.input == PATCH
    request = json.loads(world.spans(a.rollout_id, 1)[0]["attributes"]["agentbolt.llm.request"])
    (tool,) = request["tools"]
    assert tool["function"]["parameters"]["required"] == ["input"] and "lark grammar" in tool["function"]["description"]
    history = [{"role": "user", "content": "add a.txt"}, call.model_dump(exclude_none=True),
               {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Done!"}]
    second = client.responses.create(model="policy", input=history, tools=[APPLY_PATCH])  # type: ignore[list-item]
    assert second.output_text == "Patched."
    s2 = world.spans(a.rollout_id, 2)[1]
    assert s2["attributes"]["agentbolt.llm.prompt_source"] == "token_exact"
    assert "agentbolt.llm.dropped_tools" not in s2["attributes"]
