"""Port of v0.3's ``examples/azure/capital_agent.py`` (its health check: a few tasks
through ``LitAgentRunner.step``): a tool-calling agent that looks capitals up.
``from agentlightning import ...`` became ``from agentbolt import ...``."""

from __future__ import annotations

import json
import os
from typing import Any, TypedDict

import openai

from agentbolt import (
    LLM,
    AgentOpsTracer,
    InMemoryLightningStore,
    LitAgentRunner,
    rollout,
)

CAPITALS = {"japan": "Tokyo", "france": "Paris", "canada": "Ottawa", "australia": "Canberra", "kenya": "Nairobi"}
SAMPLES = [
    {"input": "What is the capital of Japan?", "output": "Tokyo"},
    {"input": "Capital city of Australia?", "output": "Canberra"},
    {"input": "Say hello in French.", "output": "Bonjour"},
]
TOOLS: list[Any] = [{
    "type": "function",
    "function": {
        "name": "country_capital_lookup",
        "description": "Get the capital city of a given country.",
        "parameters": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]},
    },
}]
SYSTEM = "You are a concise assistant. For a country's capital, ALWAYS call 'country_capital_lookup'."


class CapitalTask(TypedDict):
    input: str
    output: str


def country_capital_lookup(country: str) -> str:
    return CAPITALS.get(country.strip().lower(), "Unknown")


@rollout
def capital_agent(task: CapitalTask, llm: LLM) -> float:
    client = openai.OpenAI(base_url=llm.endpoint, api_key=os.getenv("AZURE_OPENAI_API_KEY", "sk-test"))
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task["input"]}]
    first = client.chat.completions.create(model=llm.model, messages=messages, tools=TOOLS, tool_choice="auto")
    msg = first.choices[0].message
    if msg.tool_calls:
        calls, results = [], []
        for tc in msg.tool_calls:
            args = json.loads(tc.function.arguments or "{}")
            calls.append({"id": tc.id, "type": "function",
                          "function": {"name": tc.function.name, "arguments": tc.function.arguments}})
            results.append({"role": "tool", "tool_call_id": tc.id, "content": country_capital_lookup(args["country"])})
        messages += [{"role": "assistant", "content": msg.content or "", "tool_calls": calls}, *results]
        final_text = client.chat.completions.create(model=llm.model, messages=messages).choices[0].message.content
    else:
        final_text = msg.content
    return 1.0 if task["output"].lower() in (final_text or "").lower() else 0.0


async def main(endpoint: str) -> list[Any]:
    llm = LLM(endpoint=endpoint, model="gpt-4.1-mini")
    runner = LitAgentRunner[CapitalTask](tracer=AgentOpsTracer())
    store = InMemoryLightningStore()
    rollouts = []
    with runner.run_context(agent=capital_agent, store=store):
        for sample in SAMPLES:
            rollouts.append(await runner.step(CapitalTask(**sample), resources={"main_llm": llm}))  # type: ignore[typeddict-item]
    return rollouts
