"""The agent and tasks of the SFT tests: one model call whose answer is graded exactly.

A prompt names a kind of thing and some noise (``"fruit river 42"``); the right answer
is a fixed word per kind (:data:`ANSWERS`), nothing more — the model must also learn to
stop. A random tiny model never says it; a task with ``"fail": true`` raises (an
infrastructure failure, never learned from)."""

from __future__ import annotations

import random
from typing import Any

ANSWERS = {"fruit": "ok", "metal": "no"}
_NOISE = ["apple", "river", "stone", "cloud", "lamp", "tiger", "salt", "moon", "grass", "iron"]


def tasks(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = "fruit" if i % 2 == 0 else "metal"
        out.append({"prompt": f"{kind} {rng.choice(_NOISE)} {rng.randint(0, 99)}", "answer": ANSWERS[kind]})
    return out


def record(task: dict[str, Any]) -> dict[str, Any]:
    """The chat record a perfect teacher would have made for ``task``."""
    return {"messages": [{"role": "user", "content": task["prompt"]}, {"role": "assistant", "content": task["answer"]}]}


async def exact_agent(task: dict[str, Any], llm: Any) -> float:
    """1.0 for exactly the expected answer; a fraction for a right first letter (RFT's signal)."""
    import openai

    if task.get("fail"):
        raise RuntimeError("this task's environment is broken")
    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5) as client:
        answer = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["prompt"]}], max_tokens=4)
    text = (answer.choices[0].message.content or "").strip()
    if text == task["answer"]:
        return 1.0
    return 0.5 if text[:1] == task["answer"][:1] else 0.0


async def teacher_agent(task: dict[str, Any], llm: Any) -> float:
    """Asks the model once; the reward is the task's ``teacher_reward`` (a stand-in grade)."""
    import openai

    if task.get("fail"):
        raise RuntimeError("this task's environment is broken")
    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5) as client:
        await client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["prompt"]}])
    return float(task.get("teacher_reward", 1.0))
