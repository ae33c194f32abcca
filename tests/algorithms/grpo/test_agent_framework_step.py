"""Microsoft Agent Framework's default client trains through the gateway: its
``OpenAIChatClient`` calls the Responses API and continues a conversation with
``previous_response_id`` (the gateway rebuilds the history), the tracer records the
client's own model-call spans beside the gateway's, and GRPO trains on one record per call:
each client span merged with the gateway span under it, with the engine's token ids."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("agent_framework_openai", reason="pip install agent-framework-openai")

import torch

import agentbolt
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.metrics import read_jsonl
from agentbolt.models import tiny_model
from agentbolt.store.memory import MemoryStore

TASKS = [{"prompt": "What is 2 + 3?"}, {"prompt": "What is 4 + 1?"}]
REWARDS = itertools.count()
"""Each rollout's reward: distinct, so no group ties and every rollout trains."""


async def calculator(task: dict[str, str], llm: agentbolt.LLM) -> float:
    """An Agent Framework agent with an ``add`` tool, two turns on one session: the second
    run sends only the new message and ``previous_response_id``. The tiny model answers
    noise, so the reward only has to differ within a group: each rollout gets the next
    number (the length of the 6-token answers ties too often)."""
    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatClient

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    agent = Agent(client=OpenAIChatClient(model=llm.model, base_url=llm.endpoint, api_key=llm.api_key),
                  name="calc", instructions="Use the add tool.", tools=[add])
    session = agent.create_session()
    await agent.run(task["prompt"], session=session)
    await agent.run("Are you sure?", session=session)
    return next(REWARDS) / 10


def test_a_grpo_step_trains_agent_frameworks_responses_calls_through_the_gateway(
    tmp_path: Path, trained_samples: list[Any]
) -> None:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    engine = TransformersEngine(model, tokenizer, max_batch_size=16, num_threads=1, default_max_tokens=6)
    store = MemoryStore()
    config = GRPOConfig(max_steps=1, tasks_per_step=2, group_size=4, run_dir=str(tmp_path), progress=False,
                        eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"])
    trainer = agentbolt.Trainer(algorithm=GRPO(config), store=store, runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engine, GatewayConfig(retry_after=1)))
    result = trainer.fit(calculator, TASKS)
    trained = trained_samples

    # every rollout: two calls, each recorded once (client span and gateway span merged),
    # with the engine's token ids; the second prompt holds the first turn, rebuilt by the gateway
    assert trained, "the step made no update (every group had equal rewards)"
    assert len(trained) == len({s.rollout_id for s in trained}) == 8  # one sample per rollout
    for sample in trained:
        assert len(sample.calls) == 2 and len(sample.token_ids) == len(sample.loss_mask) == len(sample.logprobs)
        assert sum(sample.loss_mask) == sample.num_response_tokens > 0
    (row,) = [r for r in read_jsonl(tmp_path / "metrics.jsonl") if "train/loss" in r]
    assert torch.isfinite(torch.tensor(row["train/loss"]))
    assert result.policy_version == 1 == engine.policy_version
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())

    async def second_request(rollout_id: str) -> dict[str, Any]:
        spans = await store.get_spans(rollout_id, "latest")
        requests = [json.loads(s.attributes["agentbolt.llm.request"]) for s in spans
                    if s.attributes.get("agentbolt.llm.token_ids_source") == "engine"]
        assert len(requests) == 2
        return requests[1]

    messages = asyncio.run(second_request(trained[0].rollout_id))["messages"]
    assert [m["role"] for m in messages][-1] == "user" and "Are you sure?" in str(messages[-1]["content"])
    assert any("What is" in str(m["content"]) for m in messages if m["role"] == "user")
