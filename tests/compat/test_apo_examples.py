"""v0.3's APO custom-algorithm and debugging examples on agentbolt, against a scripted
model and judge: the judge prefers the answers the "knowledgeable" prompt produces."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

import agentbolt as agl
from tests.compat.programs import apo_custom_algorithm as program
from tests.compat.programs import apo_debug
from tests.compat.scripted_openai import last_user

SCORES = {"helpful": "0.6", "knowledgeable": "0.9", "friendly": "0.3"}


def model(body: dict[str, Any]) -> str:
    user = last_user(body)
    if user.startswith("Evaluate how well"):
        output = user.split("Output: ", 1)[1]
        return next((score for word, score in SCORES.items() if f"[{word}]" in output), "0.1")
    word = next((w for w in SCORES if w in user), "plain")
    return f"[{word}] Shorter wavelengths scatter more (Rayleigh scattering)."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_custom_algorithm_and_runner_through_a_store_server(openai_script: Any) -> None:
    """v0.3's three terminals — ``agl store``, the algorithm, the runner — in one loop."""
    openai_script(model)
    port = _free_port()
    server = agl.LightningStoreServer(agl.InMemoryLightningStore(), "127.0.0.1", port)
    await server.start()
    algo_store = agl.LightningStoreClient(f"http://127.0.0.1:{port}")
    runner_store = agl.LightningStoreClient(f"http://127.0.0.1:{port}")
    runner = asyncio.create_task(program.apo_runner(store=runner_store))
    try:
        best = await asyncio.wait_for(program.apo_algorithm(store=algo_store), 60)
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        await algo_store.close()
        await runner_store.close()
        await server.stop()
    assert best == ("You are a knowledgeable AI. {any_question}", 0.9)


def test_custom_algorithm_in_the_trainer(openai_script: Any) -> None:
    openai_script(model)
    assert program.train_with_trainer() == ("You are a knowledgeable AI. {any_question}", 0.9)


async def test_debug_with_runner(openai_script: Any) -> None:
    openai_script(model)
    rollout, store = await apo_debug.debug_with_runner()
    assert rollout.status == "succeeded"
    spans = await store.query_spans(rollout.rollout_id)
    assert agl.find_final_reward(spans) == 0.6
    assert len([s for s in spans if s.attributes.get("gen_ai.request.model")]) == 2  # the agent and its judge


async def test_debug_with_hooks_sees_the_trace(openai_script: Any) -> None:
    openai_script(model)
    seen = await apo_debug.debug_with_hooks()
    assert len(seen) >= 2 and all(status is not None for _, status in seen)


def test_debug_with_trainer(openai_script: Any) -> None:
    openai_script(model)
    rollouts = apo_debug.debug_with_trainer()
    assert [r.rollout.status for r in rollouts] == ["succeeded", "succeeded"]
    assert [r.rollout.reward for r in rollouts] == pytest.approx([0.6, 0.6])


async def test_v03_adapters_read_the_model_calls(openai_script: Any) -> None:
    openai_script(model)
    rollout, store = await apo_debug.debug_with_runner()
    spans = await store.query_spans(rollout.rollout_id)
    triplets = agl.TracerTraceToTriplet().adapt(spans)
    assert len(triplets) == 2  # the agent's call, then its judge's
    assert triplets[0].prompt["messages"][0]["content"].startswith("You are a helpful assistant.")
    assert triplets[1].response["text"] == "0.6" and triplets[1].reward == 0.6
    assert triplets[0].metadata["rollout_id"] == rollout.rollout_id
    records = agl.TraceToMessages().adapt(spans)
    assert records[0]["messages"][-1] == {"role": "assistant", "content": triplets[0].response["text"]}


def test_baseline_runs_both_datasets_and_reads_the_rewards(openai_script: Any) -> None:
    openai_script(model)
    baseline = agl.Baseline(n_epochs=2, span_verbosity="none")
    prompt = agl.PromptTemplate(template="You are a friendly chatbot. {any_question}", engine="f-string")
    agl.Trainer(algorithm=baseline, n_workers=2, initial_resources={"main_prompt": prompt}).fit(
        program.apo_rollout, ["q1", "q2"], val_dataset=["q3"])
    assert baseline.rewards == [0.3] * 6
