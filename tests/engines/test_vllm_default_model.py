"""An agent using ``gateway_llm()`` (model ``"policy"``) against a vLLM engine built
without ``model=``: the call goes to the model vLLM serves, not a 404."""

from __future__ import annotations

from typing import Any

import openai
from gateway.vllm_fake import BASE_MODEL, FakeVLLM

import agentbolt
from agentbolt.algorithms import Evaluate
from agentbolt.engines.served_names import ServedNames
from agentbolt.engines.spec import EngineSpec
from agentbolt.server.testing import serve_app_in_thread


def ask_policy(task: Any, llm: agentbolt.LLM) -> float:
    client = openai.OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=0)
    answer = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["q"]}])
    return 1.0 if answer.choices[0].message.content == "Four." else 0.0


def test_the_default_gateway_llm_reaches_vllm_without_model() -> None:
    fake = FakeVLLM()
    with serve_app_in_thread(fake.app) as url:
        trainer = agentbolt.Trainer(algorithm=Evaluate(show=False, progress=False), n_runners=1,
                                    gateway=EngineSpec(kind="vllm", url=url + "/v1"),
                                    resources={"llm": agentbolt.gateway_llm()})
        result = trainer.fit(ask_policy, [{"q": "2+2?"}, {"q": "1+3?"}])
    assert result.n_scored == 2 and result.success_rate == 1.0
    assert {body["model"] for body in fake.seen} == {BASE_MODEL}  # "policy" never reached vLLM


def test_a_served_name_is_kept_and_others_go_to_the_base_model() -> None:
    names = ServedNames.of({"data": [{"id": "base"}, {"id": "lora-1", "parent": "base"}]})
    assert names.base == "base"
    assert names.route({"model": "lora-1"})["model"] == "lora-1"
    assert names.route({"model": "policy"})["model"] == "base"
    assert names.route({})["model"] == "base"


def test_without_a_models_listing_names_pass_through() -> None:
    """A server whose /v1/models cannot be read (an older or stripped-down one): the
    agent's model name goes through unchanged instead of every call failing."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    fake = FakeVLLM()
    app = Starlette(routes=[Route("/v1/chat/completions", fake.chat, methods=["POST"])])
    with serve_app_in_thread(app) as url:
        trainer = agentbolt.Trainer(algorithm=Evaluate(show=False, progress=False), n_runners=1,
                                    gateway=EngineSpec(kind="vllm", url=url + "/v1"),
                                    resources={"llm": agentbolt.gateway_llm(model=BASE_MODEL)})
        result = trainer.fit(ask_policy, [{"q": "2+2?"}])
    assert result.n_scored == 1 and {body["model"] for body in fake.seen} == {BASE_MODEL}
