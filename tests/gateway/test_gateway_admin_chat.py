"""``POST /v1/gateway/chat/completions``: the admin's direct line to the engine (APO's
``critic="gateway"`` when the algorithm talks to a server): no rollout, nothing recorded."""

from __future__ import annotations

import asyncio

from agentbolt import LLM
from agentbolt.algorithms.apo import HttpChatModel
from gateway.conftest import ADMIN, GatewayWorld
from gateway.fakes import REPLY

BODY = {"model": "policy", "messages": [{"role": "user", "content": "critique this prompt"}]}


def test_the_admin_reaches_the_engine_and_nothing_is_recorded(world: GatewayWorld) -> None:
    response = world.admin.post("/v1/gateway/chat/completions", json=BODY)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == REPLY
    assert world.engine.calls[-1][0]["messages"] == BODY["messages"]
    assert world.admin.get("/v1/stats").json()["total_spans"] == 0


def test_a_rollout_token_may_not_use_it_and_streaming_is_refused(world: GatewayWorld) -> None:
    attempt = world.claim()
    denied = world.client(attempt).post(world.url + "/v1/gateway/chat/completions", json=BODY)
    assert denied.status_code == 403
    streamed = world.admin.post("/v1/gateway/chat/completions", json={**BODY, "stream": True})
    assert streamed.status_code == 400 and "does not stream" in streamed.text


def test_apo_chat_model_talks_to_it(world: GatewayWorld) -> None:
    model = HttpChatModel(LLM(endpoint=world.url + "/v1/gateway", model="policy", api_key=ADMIN))

    async def ask() -> str:
        try:
            return await model.chat(BODY["messages"], temperature=0.0)
        finally:
            await model.aclose()

    assert asyncio.run(ask()) == REPLY
