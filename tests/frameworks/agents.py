"""One small tool-using agent per framework, each pointed at a gateway URL the way a user
points it at any OpenAI-compatible server: ``base_url`` + ``api_key`` (inside a rollout,
``llm.endpoint`` / ``llm.api_key``). Each answers "What is 2 + 3?" with an ``add`` tool and
returns its final text."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
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
    from agents import (
        Agent,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # its trace export goes to OpenAI; the gateway records the calls

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


FRAMEWORKS: dict[str, tuple[str, Callable[[str, str], str]]] = {
    # name: (the module that must be importable, the agent)
    "openai-chat": ("openai", plain_openai_chat),
    "openai-responses": ("openai", plain_openai_responses),
    "openai-agents": ("agents", openai_agents_sdk),
    "agent-framework": ("agent_framework_openai", agent_framework),
    "langgraph": ("langgraph", langgraph),
    "litellm": ("litellm", litellm),
    "autogen": ("autogen_ext.models.openai", autogen),
}
