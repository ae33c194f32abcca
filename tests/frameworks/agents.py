"""One small tool-using agent per framework, pointed at a model the way a user points it
at any OpenAI-compatible server: ``base_url`` + ``api_key`` (inside a rollout,
``llm.endpoint`` / ``llm.api_key`` — the gateway, or a model server). Each answers "What
is 2 + 3?" with an ``add`` tool and returns its final text; where the framework has
agents, the agent is named ``calc``.

:data:`FRAMEWORKS` is the matrix's registry (``test_frameworks.py``): one
:class:`Framework` record per framework. A framework whose pins clash with the test venv
keeps its agent in a module of its own, imported only in that framework's venv
(``venv=``; built by ``scripts/install_framework_venvs``)."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any

QUESTION = "What is 2 + 3?"
INSTRUCTIONS = "Use the add tool."
ADD_SCHEMA = {"type": "function", "function": {
    "name": "add", "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}


def _add(a: int, b: int) -> int:
    return a + b


def plain_openai_chat(base_url: str, api_key: str) -> str:
    """``openai`` Chat Completions, with the tool loop written by hand."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    messages: list[dict[str, Any]] = [{"role": "system", "content": INSTRUCTIONS},
                                      {"role": "user", "content": QUESTION}]
    for _ in range(3):
        answer = client.chat.completions.create(model="policy", messages=messages, tools=[ADD_SCHEMA])
        message = answer.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            result = _add(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    raise RuntimeError("no final answer")


def plain_openai_responses(base_url: str, api_key: str) -> str:
    """``openai`` Responses API with ``previous_response_id``."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    tool = {"type": "function", **ADD_SCHEMA["function"]}
    response = client.responses.create(model="policy", instructions=INSTRUCTIONS, input=QUESTION, tools=[tool])
    for _ in range(3):
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return response.output_text
        outputs = [{"type": "function_call_output", "call_id": c.call_id,
                    "output": str(_add(**json.loads(c.arguments)))} for c in calls]
        response = client.responses.create(model="policy", instructions=INSTRUCTIONS, input=outputs, tools=[tool],
                                           previous_response_id=response.id)
    raise RuntimeError("no final answer")


def openai_agents_sdk(base_url: str, api_key: str) -> str:
    """The OpenAI Agents SDK with its default model class (``OpenAIResponsesModel``)."""
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool
    from openai import AsyncOpenAI

    # the SDK's tracing stays on: agentbolt's instrumentor (openinference-instrumentation-
    # openai-agents) replaces its export to OpenAI and names the agent of each call

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return _add(a, b)

    async def run() -> str:
        async with AsyncOpenAI(base_url=base_url, api_key=api_key) as client:
            agent = Agent(name="calc", instructions=INSTRUCTIONS, tools=[add],
                          model=OpenAIResponsesModel(model="policy", openai_client=client))
            return str((await Runner.run(agent, QUESTION)).final_output)

    return asyncio.run(run())


def agent_framework(base_url: str, api_key: str) -> str:
    """Microsoft Agent Framework with its default OpenAI client (``OpenAIChatClient``:
    the Responses API, with ``previous_response_id``)."""
    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatClient

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return _add(a, b)

    agent = Agent(client=OpenAIChatClient(model="policy", base_url=base_url, api_key=api_key), name="calc",
                  instructions=INSTRUCTIONS, tools=[add])
    return str(asyncio.run(agent.run(QUESTION)).text)


def langgraph(base_url: str, api_key: str) -> str:
    """LangGraph's prebuilt ReAct agent on LangChain's ``ChatOpenAI``."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return _add(a, b)

    agent = create_react_agent(ChatOpenAI(model="policy", base_url=base_url, api_key=api_key), [add],
                               prompt=INSTRUCTIONS)
    result = agent.invoke({"messages": [("user", QUESTION)]})
    return str(result["messages"][-1].content)


def autogen(base_url: str, api_key: str) -> str:
    """AutoGen AgentChat's ``AssistantAgent`` on ``OpenAIChatCompletionClient`` (Chat
    Completions). A model name OpenAI does not know needs ``model_info``. With
    ``max_tool_iterations`` the agent calls the model again on the tool's result, with the
    tools (``reflect_on_tool_use`` would call it without them: another prompt, not a
    continuation of the first call, so a second training sample)."""
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.models import ModelInfo
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return _add(a, b)

    async def run() -> str:
        info = ModelInfo(vision=False, function_calling=True, json_output=False, family="unknown",
                         structured_output=False)
        client = OpenAIChatCompletionClient(model="policy", base_url=base_url, api_key=api_key, model_info=info)
        try:
            agent = AssistantAgent("calc", model_client=client, tools=[add], system_message=INSTRUCTIONS,
                                   max_tool_iterations=3)
            result = await agent.run(task=QUESTION)
            return str(result.messages[-1].content)
        finally:
            await client.close()

    return asyncio.run(run())


def litellm(base_url: str, api_key: str) -> str:
    """LiteLLM's ``completion`` (provider ``openai/``), tool loop by hand."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else it fetches a price list at import
    import litellm as lt

    messages: list[dict[str, Any]] = [{"role": "system", "content": INSTRUCTIONS},
                                      {"role": "user", "content": QUESTION}]
    for _ in range(3):
        response = lt.completion(model="openai/policy", api_base=base_url, api_key=api_key, messages=messages,
                                 tools=[ADD_SCHEMA])
        message = response.choices[0].message
        calls = message.tool_calls or []
        messages.append({"role": "assistant", "content": message.content,
                         **({"tool_calls": [c.model_dump() for c in calls]} if calls else {})})
        if not calls:
            return str(message.content)
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": str(_add(**json.loads(call.function.arguments)))})
    raise RuntimeError("no final answer")


@dataclass(frozen=True)
class Framework:
    """One framework of the matrix."""

    module: str
    """A module that is importable when the framework is installed (else its tests skip)."""
    agent: str
    """The agent, ``module:function`` with the signature ``agent(base_url, api_key) -> str``."""
    agent_name: str | None = None
    """The name the framework gives its agent (``calc``; LangGraph's prebuilt ReAct agent
    calls the model in its node ``agent``), where it has agents."""
    samples: int = 1
    """Training samples one rollout makes through the gateway (1: every call continues the last)."""
    venv: str | None = None
    """The cached venv it runs in (``scripts/install_framework_venvs``); None: the test venv."""
    tracer_gap: str | None = None
    """Why agentbolt's tracer cannot record its calls made straight to a model (an expected,
    documented gap: that test is a strict xfail); None: the tracer records them."""


FRAMEWORKS: dict[str, Framework] = {
    "openai-chat": Framework("openai", "frameworks.agents:plain_openai_chat"),
    "openai-responses": Framework("openai", "frameworks.agents:plain_openai_responses"),
    "openai-agents": Framework("agents", "frameworks.agents:openai_agents_sdk", agent_name="calc"),
    "agent-framework": Framework("agent_framework_openai", "frameworks.agents:agent_framework", agent_name="calc"),
    "langgraph": Framework("langgraph", "frameworks.agents:langgraph", agent_name="agent"),  # the ReAct node
    "litellm": Framework("litellm", "frameworks.agents:litellm"),
    "autogen": Framework("autogen_ext.models.openai", "frameworks.agents:autogen", agent_name="calc"),
    "crewai": Framework("crewai", "frameworks.crewai_agent:crewai", agent_name="calc", venv="crewai"),
}
