"""``Trainer.dev`` with a real ``openai`` agent against the fake OpenAI-compatible server:
the printed trace shows the model call (model, tokens, messages) and the reward."""

from __future__ import annotations

import io
from typing import Any

import openai
from rich.console import Console

from agentbolt.runner import rollout
from agentbolt.trainer import Trainer
from agentbolt.types import LLM, RolloutStatus
from fakes.openai_server import serve_fake_openai


@rollout
def openai_agent(task: dict[str, Any], llm: LLM) -> float:
    client = openai.OpenAI(base_url=llm.endpoint, api_key="test")
    reply = client.chat.completions.create(
        model=llm.model, messages=[{"role": "user", "content": task["question"]}], **llm.sampling_parameters
    )
    return 1.0 if task["question"] in (reply.choices[0].message.content or "") else 0.0


def test_dev_shows_model_calls_and_rewards() -> None:
    out = io.StringIO()
    with serve_fake_openai() as base_url:
        trainer = Trainer(resources={"llm": LLM(endpoint=base_url, model="fake-model", sampling_parameters={"temperature": 0.0})})
        results = trainer.dev(openai_agent, [{"question": "two plus two"}, {"question": "capital of France"}],
                              console=Console(file=out, width=140))

    assert [r.rollout.status for r in results] == [RolloutStatus.SUCCEEDED] * 2
    assert [r.rollout.reward for r in results] == [1.0, 1.0]
    model_calls = [s for s in results[0].spans if s.attributes.get("gen_ai.request.model") == "fake-model"]
    assert len(model_calls) == 1
    text = out.getvalue()
    assert "chat fake-model" in text  # the span name, GenAI-style
    assert "user: two plus two" in text and "→ echo: two plus two" in text  # request and response
    assert "token ids: engine" in text
    assert "reward = 1.0" in text
