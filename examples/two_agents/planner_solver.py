"""The agent: a planner and a solver that share one model endpoint.

The planner writes a plan for the question; the solver answers it, following the plan.
Each runs inside ``agentbolt.agent(...)``, so every model call it makes is recorded
with its name — which is how training later picks the solver's calls only
(``agent_match="solver"``) while the planner keeps running unchanged.
"""

from __future__ import annotations

import re
from typing import Any

import openai

import agentbolt

PLANNER = "You are the planner. Write a short plan for answering the user's question."
SOLVER = "You are the solver. Follow the plan and give the final answer after '=>'."

DATASET: list[dict[str, Any]] = [
    {"question": "What is 17 + 25?", "answer": 42},
    {"question": "What is 6 * 7?", "answer": 42},
    {"question": "What is 100 - 58?", "answer": 42},
    {"question": "What is seventeen plus twenty-five?", "answer": 42},
    {"question": "What is 12 * 12?", "answer": 144},
    {"question": "What is 1000 - 1?", "answer": 999},
    {"question": "What is nine times nine?", "answer": 81},
    {"question": "What is 250 + 750?", "answer": 1000},
]


def chat(client: openai.OpenAI, llm: agentbolt.LLM, system: str, user: str) -> str:
    """One model call; ``llm.sampling_parameters`` go to the request as they are."""
    response = client.chat.completions.create(
        model=llm.model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        **llm.sampling_parameters,
    )
    return response.choices[0].message.content or ""


def score(reply: str, expected: int) -> float:
    """1.0 when the number after the last '=>' is the expected answer."""
    found = re.findall(r"=>\s*(-?\d+)", reply)
    return 1.0 if found and int(found[-1]) == expected else 0.0


def plan_then_solve(task: dict[str, Any], llm: agentbolt.LLM, planner_llm: agentbolt.LLM | None = None, *,
                    planner_prompt: str = PLANNER, solver_prompt: str = SOLVER) -> str:
    """The planner's call, then the solver's; the solver's reply. ``planner_llm`` (default:
    ``llm``) lets the planner call another model — its own policy when each agent has one,
    or the same one with other sampling settings. The prompts are the agents' system prompts."""
    planner_llm = planner_llm or llm
    with _client(planner_llm) as client, agentbolt.agent("planner"):
        plan = chat(client, planner_llm, planner_prompt, task["question"])
    with _client(llm) as client, agentbolt.agent("solver"):
        return chat(client, llm, solver_prompt, f"Question: {task['question']}\nPlan: {plan}")


def _client(llm: agentbolt.LLM) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)


@agentbolt.rollout
def plan_and_solve(task: dict[str, Any], llm: agentbolt.LLM, planner_llm: agentbolt.LLM | None = None) -> float:
    return score(plan_then_solve(task, llm, planner_llm), task["answer"])
