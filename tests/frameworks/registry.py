"""The framework matrix's registry (``test_frameworks.py``): one :class:`Framework` record
per framework — where its agent is, what the model answers it call by call (on both
paths: the gateway's scripted engine and the tracer path's model server), and what its
rollout must come out as."""

from __future__ import annotations

from dataclasses import dataclass

TOOL_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
"""The model's call of the ``add`` tool, in the hermes format: the gateway parses it into an
API tool call, and so does the tracer path's model server (:mod:`frameworks.tool_model`)."""

ANSWER = "The answer is 5."


@dataclass(frozen=True)
class Framework:
    """One framework of the matrix."""

    module: str
    """A module that is importable when the framework is installed (else its tests skip)."""
    agent: str
    """The agent, ``module:function`` with the signature ``agent(base_url, api_key) -> str``."""
    agent_name: str | None = None
    """The agent name its calls carry (``calc``, where the framework names agents; LangGraph's
    prebuilt ReAct agent calls the model in its node ``agent``); None: no name arrives
    (docs/frameworks.md says why)."""
    replies: tuple[str, ...] = (TOOL_CALL, ANSWER)
    """What the model writes, the n-th reply once the conversation holds n tool results (a
    hermes ``<tool_call>`` block is an API tool call; a ReAct framework's text format is text)."""
    calls: int = 2
    """Model calls one rollout makes."""
    samples: int = 1
    """Training samples one rollout makes through the gateway: more than one where the
    framework rewrites its history between calls, so a later prompt does not extend the
    earlier call's tokens (merge rate ``1 - (samples - 1) / (calls - 1)``)."""
    token_exact: bool = True
    """Whether, through the gateway, the last call's prompt is the earlier call's tokens
    continued (not rendered anew)."""
    api_tool_calls: bool = True
    """Whether the tool call travels as an API tool call (False: as text in the prompt)."""
    forces_tool_call: bool = False
    """Whether it sends ``tool_choice="required"``: the gateway then writes the opening
    ``<tool_call>\\n`` itself and the scripted engine only the rest of each reply."""
    venv: str | None = None
    """The cached venv it runs in (``scripts/install_framework_venvs``); None: the test venv."""
    tracer_gap: str | None = None
    """Why agentbolt's tracer cannot record its calls made straight to a model (an expected,
    documented gap: that test is a strict xfail); None: the tracer records them."""


def _dspy_fields(**fields: str) -> str:
    """A reply in DSPy's ``ChatAdapter`` format: ``[[ ## field ## ]]`` sections."""
    return "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in fields.items()) + "[[ ## completed ## ]]"


def _agent(function: str) -> str:
    return f"frameworks.agents:{function}"


FRAMEWORKS: dict[str, Framework] = {
    "openai-chat": Framework("openai", _agent("plain_openai_chat")),
    "openai-responses": Framework("openai", _agent("plain_openai_responses")),
    "openai-agents": Framework("agents", _agent("openai_agents_sdk"), agent_name="calc"),
    "agent-framework": Framework("agent_framework_openai", _agent("agent_framework"), agent_name="calc"),
    "langgraph": Framework("langgraph", _agent("langgraph"), agent_name="agent"),  # the ReAct node
    "litellm": Framework("litellm", _agent("litellm")),
    "autogen": Framework("autogen_ext.models.openai", _agent("autogen"), agent_name="calc"),
    "crewai": Framework("crewai", "frameworks.crewai_agent:crewai", agent_name="calc", venv="crewai"),
    "pydantic-ai-chat": Framework("pydantic_ai", _agent("pydantic_ai_chat"), agent_name="calc"),
    "pydantic-ai-responses": Framework("pydantic_ai", _agent("pydantic_ai_responses"), agent_name="calc"),
    # tool_choice="required"; it answers through its own final_answer tool and writes earlier
    # calls back as text ("Calling tools:", "Observation:"): each prompt is rendered anew
    "smolagents": Framework(
        "smolagents",
        _agent("smolagents"),
        agent_name="calc",
        replies=(
            TOOL_CALL,
            '<tool_call>\n{"name": "final_answer", "arguments": {"answer": "The answer is 5."}}\n</tool_call>',
        ),
        samples=2,
        token_exact=False,
        api_tool_calls=False,
        forces_tool_call=True,
    ),
    "llama-index-function": Framework(
        "llama_index.llms.openai_like", _agent("llama_index_function"), agent_name="calc"
    ),
    # tools in the system prompt, calls and results as ReAct text
    "llama-index-react": Framework(
        "llama_index.llms.openai_like",
        _agent("llama_index_react"),
        agent_name="calc",
        replies=(
            'Thought: I need to use a tool.\nAction: add\nAction Input: {"a": 2, "b": 3}',
            "Thought: I can answer without using any more tools.\nAnswer: The answer is 5.",
        ),
        samples=2,
        token_exact=False,
        api_tool_calls=False,
    ),
    "google-adk": Framework("google.adk", _agent("google_adk"), agent_name="calc"),
    "strands": Framework("strands", _agent("strands"), agent_name="calc"),
    # its Agent takes no name; only a Pipeline names its components (docs/frameworks.md)
    "haystack": Framework("haystack", _agent("haystack")),
    # ReAct steps in DSPy's field format, then the extract step: each prompt anew
    "dspy": Framework(
        "dspy",
        _agent("dspy_react"),
        agent_name=None,  # DSPy's modules have no names
        replies=(
            _dspy_fields(next_thought="I add them.", next_tool_name="add", next_tool_args='{"a": 2, "b": 3}'),
            _dspy_fields(next_thought="I have the sum.", next_tool_name="finish", next_tool_args="{}"),
            _dspy_fields(reasoning="2 + 3 = 5.", answer=ANSWER),
        ),
        calls=3,
        samples=3,
        token_exact=False,
        api_tool_calls=False,
    ),
}
