"""v0.3's minimal examples on agentbolt: spans written by hand with a tracer (to a store
in memory or behind a server), and an LLM proxy recording the calls of a rollout."""

from __future__ import annotations

import socket
from typing import Any

import agentbolt as agl
from tests.compat.programs import llm_proxy, write_traces


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _check_manual_trace(traces: list[Any]) -> None:
    by_name = {span.name: span for span in traces}
    assert {"grpc-span-1", "grpc-span-2", "grpc-span-3"} <= set(by_name)
    assert by_name["grpc-span-2"].parent_id == by_name["grpc-span-1"].span_id
    assert agl.find_final_reward(traces) == 1.0
    reward_span = agl.find_reward_spans(traces)[-1]
    assert [(r.name, r.value) for r in agl.get_rewards_from_span(reward_span)] == [("reward", 1.0)]


async def test_write_traces_to_a_store_in_memory() -> None:
    _check_manual_trace(await write_traces.send_traces_via_otel())


async def test_write_traces_through_a_store_client() -> None:
    port = _free_port()
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "127.0.0.1", port)
    await server.start()
    try:
        traces = await write_traces.send_traces_via_otel(f"http://127.0.0.1:{port}")
    finally:
        await server.stop()
    _check_manual_trace(traces)


async def test_llm_proxy_records_the_calls_of_a_rollout(openai_script: Any) -> None:
    upstream = openai_script(lambda body: "I am a scripted assistant.")
    store_port, proxy_port = _free_port(), _free_port()
    proxy, store_server = await llm_proxy.serve_llm_proxy_with_openai("gpt-4.1-mini", store_port, proxy_port)
    try:
        body, spans = await llm_proxy.test_llm_proxy("gpt-4.1-mini", store_port, proxy_port)
    finally:
        await proxy.stop()
        await store_server.stop()
    assert body["choices"][0]["message"]["content"] == "I am a scripted assistant."
    assert upstream.calls[0]["messages"][0]["content"] == "Hello, what's your name?"
    calls = [s for s in spans if s.attributes.get("gen_ai.request.model")]
    assert len(calls) == 1 and calls[0].attributes["gen_ai.request.model"] == "gpt-4.1-mini"


def capital_model(body: dict[str, Any]) -> Any:
    """Looks capitals up with the tool; answers anything else itself ("Salut")."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return f"The capital is {messages[-1]['content']}."
    question = messages[-1]["content"]
    country = next((c for c in ("Japan", "Australia") if c in question), None)
    if country is None:
        return "Salut!"
    return {"content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "country_capital_lookup", "arguments": f'{{"country": "{country}"}}'}}]}


async def test_capital_agent_health_check(openai_script: Any) -> None:
    """The Azure example's health check, against a scripted endpoint: two capitals found
    through the tool, one answer wrong."""
    from tests.compat.programs import capital_agent

    server = openai_script(capital_model)
    rollouts = await capital_agent.main(server.url)
    assert [r.status for r in rollouts] == ["succeeded"] * 3
    assert [r.reward for r in rollouts] == [1.0, 1.0, 0.0]
    assert len(server.calls) == 5
