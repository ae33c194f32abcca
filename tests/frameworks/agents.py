"""One small tool-using agent per framework, pointed at a model the way a user points it
at any OpenAI-compatible server: ``base_url`` + ``api_key`` (inside a rollout,
``llm.endpoint`` / ``llm.api_key`` — the gateway, or a model server). Each answers "What
is 2 + 3?" with an ``add`` tool and returns its final text; where the framework has
agents, the agent is named ``calc``.

The matrix's registry, what the model answers each framework and what its rollout comes
out as, is :mod:`frameworks.registry`. A framework whose pins clash with the test venv
keeps its agent in a module of its own, imported only in that framework's venv
(:mod:`frameworks.crewai_agent`)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

QUESTION = "What is 2 + 3?"
INSTRUCTIONS = "Use the add tool."
ADD_SCHEMA = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


def _add(a: int, b: int) -> int:
    return a + b


def add(a: int, b: int) -> int:
    """Add two integers."""
    return _add(a, b)


def plain_openai_chat(base_url: str, api_key: str) -> str:
    """``openai`` Chat Completions, with the tool loop written by hand."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": QUESTION},
    ]
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
        outputs = [
            {"type": "function_call_output", "call_id": c.call_id, "output": str(_add(**json.loads(c.arguments)))}
            for c in calls
        ]
        response = client.responses.create(
            model="policy", instructions=INSTRUCTIONS, input=outputs, tools=[tool], previous_response_id=response.id
        )
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
            agent = Agent(
                name="calc",
                instructions=INSTRUCTIONS,
                tools=[add],
                model=OpenAIResponsesModel(model="policy", openai_client=client),
            )
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

    agent = Agent(
        client=OpenAIChatClient(model="policy", base_url=base_url, api_key=api_key),
        name="calc",
        instructions=INSTRUCTIONS,
        tools=[add],
    )
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

    agent = create_react_agent(
        ChatOpenAI(model="policy", base_url=base_url, api_key=api_key), [add], prompt=INSTRUCTIONS
    )
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
        info = ModelInfo(
            vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False
        )
        client = OpenAIChatCompletionClient(model="policy", base_url=base_url, api_key=api_key, model_info=info)
        try:
            agent = AssistantAgent(
                "calc", model_client=client, tools=[add], system_message=INSTRUCTIONS, max_tool_iterations=3
            )
            result = await agent.run(task=QUESTION)
            return str(result.messages[-1].content)
        finally:
            await client.close()

    return asyncio.run(run())


def litellm(base_url: str, api_key: str) -> str:
    """LiteLLM's ``completion`` (provider ``openai/``), tool loop by hand."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else it fetches a price list at import
    import litellm as lt

    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": QUESTION},
    ]
    for _ in range(3):
        response = lt.completion(
            model="openai/policy", api_base=base_url, api_key=api_key, messages=messages, tools=[ADD_SCHEMA]
        )
        message = response.choices[0].message
        calls = message.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                **({"tool_calls": [c.model_dump() for c in calls]} if calls else {}),
            }
        )
        if not calls:
            return str(message.content)
        for call in calls:
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": str(_add(**json.loads(call.function.arguments)))}
            )
    raise RuntimeError("no final answer")


def pydantic_ai_chat(base_url: str, api_key: str) -> str:
    """PydanticAI's ``Agent`` on ``OpenAIChatModel`` (Chat Completions)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("policy", provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    agent = Agent(model, name="calc", instructions=INSTRUCTIONS, tools=[add])
    return str(agent.run_sync(QUESTION).output)


def pydantic_ai_responses(base_url: str, api_key: str) -> str:
    """PydanticAI's ``Agent`` on ``OpenAIResponsesModel`` (the Responses API)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIResponsesModel("policy", provider=OpenAIProvider(base_url=base_url, api_key=api_key))
    agent = Agent(model, name="calc", instructions=INSTRUCTIONS, tools=[add])
    return str(agent.run_sync(QUESTION).output)


def smolagents(base_url: str, api_key: str) -> str:
    """smolagents' ``ToolCallingAgent`` on ``OpenAIServerModel`` (Chat Completions). It ends
    by calling its own ``final_answer`` tool."""
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: the first integer.
            b: the second integer.
        """
        return _add(a, b)

    agent = ToolCallingAgent(
        tools=[add],
        model=OpenAIServerModel("policy", api_base=base_url, api_key=api_key),
        name="calc",
        instructions=INSTRUCTIONS,
        max_steps=3,
        verbosity_level=0,
    )
    return str(agent.run(QUESTION))


def _run_llama_index(agent: Any) -> str:
    """Run a LlamaIndex workflow agent on the question (``run`` wants a running event loop)."""

    async def run() -> str:
        return str(await agent.run(user_msg=QUESTION))

    return asyncio.run(run())


def _llama_index_llm(base_url: str, api_key: str) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model="policy",
        api_base=base_url,
        api_key=api_key,
        is_chat_model=True,
        is_function_calling_model=True,
        context_window=8192,
    )


def llama_index_function(base_url: str, api_key: str) -> str:
    """LlamaIndex's ``FunctionAgent`` on ``OpenAILike`` (Chat Completions, tool calls)."""
    from llama_index.core.agent.workflow import FunctionAgent

    agent = FunctionAgent(name="calc", tools=[add], llm=_llama_index_llm(base_url, api_key), system_prompt=INSTRUCTIONS)
    return _run_llama_index(agent)


def llama_index_react(base_url: str, api_key: str) -> str:
    """LlamaIndex's ``ReActAgent`` on ``OpenAILike``: tools described in the prompt, the
    model writes ``Thought/Action/Action Input`` text (no API tool calls)."""
    from llama_index.core.agent.workflow import ReActAgent

    agent = ReActAgent(name="calc", tools=[add], llm=_llama_index_llm(base_url, api_key), system_prompt=INSTRUCTIONS)
    return _run_llama_index(agent)


def google_adk(base_url: str, api_key: str) -> str:
    """Google ADK's ``LlmAgent`` on its ``LiteLlm`` model (provider ``openai/``)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    agent = LlmAgent(
        name="calc",
        model=LiteLlm(model="openai/policy", api_base=base_url, api_key=api_key),
        instruction=INSTRUCTIONS,
        tools=[add],
    )

    async def run() -> str:
        runner = InMemoryRunner(agent=agent, app_name="calc")
        session = await runner.session_service.create_session(app_name="calc", user_id="user")
        question = types.Content(role="user", parts=[types.Part(text=QUESTION)])
        text = ""
        async for event in runner.run_async(user_id="user", session_id=session.id, new_message=question):
            if event.is_final_response() and event.content and event.content.parts:
                text = "".join(part.text or "" for part in event.content.parts)
        return text

    return asyncio.run(run())


def strands(base_url: str, api_key: str) -> str:
    """Strands Agents' ``Agent`` on its ``OpenAIModel`` provider (Chat Completions, streamed)."""
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return _add(a, b)

    model = OpenAIModel(client_args={"base_url": base_url, "api_key": api_key}, model_id="policy")
    agent = Agent(model=model, tools=[add], system_prompt=INSTRUCTIONS, name="calc", callback_handler=None)
    return str(agent(QUESTION))


def haystack(base_url: str, api_key: str) -> str:
    """Haystack's ``Agent`` component on ``OpenAIChatGenerator`` (Chat Completions). Its
    ``Agent`` has no name."""
    os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # else it sends usage data to PostHog
    from haystack.components.agents import Agent
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.dataclasses import ChatMessage
    from haystack.tools import Tool
    from haystack.utils import Secret

    function = ADD_SCHEMA["function"]
    add = Tool(
        name=function["name"], description=function["description"], parameters=function["parameters"], function=_add
    )
    generator = OpenAIChatGenerator(api_key=Secret.from_token(api_key), model="policy", api_base_url=base_url)
    agent = Agent(chat_generator=generator, tools=[add], system_prompt=INSTRUCTIONS)
    agent.warm_up()
    return str(agent.run(messages=[ChatMessage.from_user(QUESTION)])["messages"][-1].text)


def dspy_react(base_url: str, api_key: str) -> str:
    """DSPy's ``ReAct`` on ``dspy.LM`` (LiteLLM, provider ``openai/``), with its cache off:
    the cache keys on the prompt, not the base URL."""
    import dspy

    lm = dspy.LM("openai/policy", api_base=base_url, api_key=api_key, cache=False)
    with dspy.context(lm=lm):
        return str(dspy.ReAct("question -> answer", tools=[add])(question=QUESTION).answer)
