"""The matrix's CrewAI agent. CrewAI pins openai<3 and pydantic<2.13, so it runs in a venv
of its own (``scripts/install_framework_venvs crewai``): only a runner there imports this
module."""

from __future__ import annotations

import os

from frameworks.agents import INSTRUCTIONS, QUESTION


def crewai(base_url: str, api_key: str) -> str:
    """A one-agent crew (role ``calc``) on CrewAI's ``LLM`` (provider ``openai/``: Chat
    Completions), with an ``add`` tool."""
    os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # else it posts telemetry to CrewAI
    os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool

    @tool("add")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    llm = LLM(model="openai/policy", base_url=base_url, api_key=api_key)
    agent = Agent(
        role="calc", goal=INSTRUCTIONS, backstory="You add numbers with the add tool.", tools=[add], llm=llm, max_iter=3
    )
    task = Task(description=QUESTION, expected_output="The sum.", agent=agent)
    return str(Crew(agents=[agent], tasks=[task]).kickoff())
