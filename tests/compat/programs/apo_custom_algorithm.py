"""Port of v0.3's ``examples/apo/apo_custom_algorithm.py`` (and ``..._trainer.py``): a
hand-written prompt search talking to the store, and a runner serving it.
``import agentlightning as agl`` became ``import agentbolt as agl``; nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from openai import AsyncOpenAI

import agentbolt as agl

PROMPTS = [
    "You are a helpful assistant. {any_question}",
    "You are a knowledgeable AI. {any_question}",
    "You are a friendly chatbot. {any_question}",
]
QUESTION = "Explain why the sky appears blue using principles of light scattering in 100 words."


async def apo_algorithm(*, store: agl.LightningStore) -> tuple[str, float]:
    """Try each prompt on one task and keep the one the judge liked best."""
    scored: list[tuple[str, float]] = []
    for prompt in PROMPTS:
        resources: agl.NamedResources = {"main_prompt": agl.PromptTemplate(template=prompt, engine="f-string")}
        await store.add_resources(resources)
        rollout = await store.enqueue_rollout(input=QUESTION, mode="train")
        for _ in range(150):
            finished = await store.wait_for_rollouts(rollout_ids=[rollout.rollout_id], timeout=0.01)
            if finished:
                break
            await asyncio.sleep(0.2)
        else:
            raise RuntimeError("no runner finished the rollout in 30 seconds")
        if finished[0].status != "succeeded":
            raise RuntimeError(f"rollout {rollout.rollout_id} ended {finished[0].status}")
        spans = await store.query_spans(rollout.rollout_id)
        log_llm_spans(spans)
        reward = agl.find_final_reward(spans)
        assert reward is not None, "the rollout emitted no reward"
        scored.append((prompt, reward))
    return max(scored, key=lambda pair: pair[1])


@agl.rollout
async def apo_rollout(task: str, prompt_template: agl.PromptTemplate) -> float:
    client = AsyncOpenAI()
    result = await client.chat.completions.create(
        model="gpt-4.1-nano", messages=[{"role": "user", "content": prompt_template.format(any_question=task)}]
    )
    return await llm_judge(task, result.choices[0].message.content)


def log_llm_spans(spans: Sequence[agl.Span]) -> list[str]:
    """The model-call spans (v0.3 logged those whose name mentions chat completions)."""
    return [span.span_id for span in spans if "chat" in span.name]


async def llm_judge(task: str, output: str | None) -> float:
    client = AsyncOpenAI()
    result = await client.chat.completions.create(
        model="gpt-4.1-nano",
        messages=[{"role": "user", "content": (
            "Evaluate how well the output fulfills the task.\n"
            f"Task: {task}\nOutput: {output}\n"
            "Return only a number between 0 and 1."
        )}],
        temperature=0.0,
    )
    try:
        return float(result.choices[0].message.content or "")
    except ValueError:
        return 0.0


async def apo_runner(*, store: agl.LightningStore) -> None:
    runner = agl.LitAgentRunner[str](tracer=agl.AgentOpsTracer())
    with runner.run_context(agent=apo_rollout, store=store):
        await runner.iter()


@agl.algo
async def apo_algorithm_usable_in_trainer(*, store: agl.LightningStore) -> tuple[str, float]:
    return await apo_algorithm(store=store)


def train_with_trainer() -> tuple[str, float]:
    agl.setup_logging()
    trainer = agl.Trainer(n_workers=1, algorithm=apo_algorithm_usable_in_trainer)
    return trainer.fit(apo_rollout)
