"""A stand-alone LangChain agent with a calculator tool. It knows nothing about agentbolt.

``ChatOpenAI`` (through the ``openai`` package) reads ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY`` from the environment — the controller sets them to the rollout's
gateway URL and token, so every model call of the agent loop is recorded.

    OPENAI_BASE_URL=http://localhost:8000/v1 OPENAI_API_KEY=none python agent.py --question "What is 2 + 3?"
"""

import argparse
import sys

try:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
except ImportError as exc:  # the harness shows this on stderr and in the failed attempt
    sys.exit(f"this agent needs LangChain ({exc}): pip install 'agentbolt[langchain]' "
             "(or pip install langchain-core langchain-openai)")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def answer(question: str, model: str, max_steps: int = 4) -> str:
    llm = ChatOpenAI(model=model, max_tokens=64).bind_tools([add])
    messages = [
        SystemMessage("Use the add tool for sums, then answer with 'The answer is N.'"),
        HumanMessage(question),
    ]
    for _ in range(max_steps):
        reply = llm.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return str(reply.content)
        for call in reply.tool_calls:
            result = add.invoke(call["args"]) if call["name"] == "add" else f"unknown tool {call['name']}"
            messages.append(ToolMessage(str(result), tool_call_id=call["id"]))
    return "I could not finish."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--question", required=True)
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    print(answer(args.question, args.model))


if __name__ == "__main__":
    main()
