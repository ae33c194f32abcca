"""The agent: ``examples/calc``'s word problems, its calculator an MCP server's ``evaluate`` tool.

Per rollout the agent starts its own calculator server (``calc_server.py`` over stdio,
a child process that lives as long as the rollout) — or, given a URL in the task's
resources, connects to a running one over streamable HTTP — and drives the episode:

1. turn 1 — the model sees the question (and a worked example) and should reply
   ``CALC(<expression>)``;
2. the agent calls the MCP tool ``evaluate`` with the expression (recorded as an
   ``execute_tool evaluate`` span, between the two model calls in the dashboard's
   waterfall) and answers ``Result: N. Now give the final answer as ANSWER: <number>.``
   with the tool's text (or ``Error: ...`` when the tool refused the expression);
3. turn 2 — the model answers.

Reward: 1 for a correct final answer, +0.1 when the tool evaluated the call (the same
shaping as ``examples/calc``, so the numbers compare). The protocol's wording and the
problem sets are ``examples/calc``'s; only the calculator moved behind MCP.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # examples/: the calc example's task

from calc.task import (  # noqa: E402
    CALL_BONUS,
    DEFAULT_PROTOCOL,
    MAX_MODEL_CALLS,
    MAX_TOKENS,
    Protocol,
    heldout_set,
    parse_answer,
    parse_call,
    train_set,
)

import agentbolt  # noqa: E402
from agentbolt.mcp import HttpServer, MCPTools, StdioServer, connect  # noqa: E402

__all__ = ["MAX_TOKENS", "SERVER", "McpEpisode", "heldout_set", "mcp_calc_agent", "reward", "train_set"]

SERVER = StdioServer(sys.executable, [str(HERE / "calc_server.py")])
"""The calculator, started per rollout (stdio)."""


@dataclass
class McpEpisode:
    """One problem, the calculator behind ``tools``."""

    task: dict[str, Any]
    tools: MCPTools
    protocol: Protocol = DEFAULT_PROTOCOL
    history: list[dict[str, str]] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    tool_ok: bool = False
    answer: float | None = None
    done: bool = False

    def __post_init__(self) -> None:
        self.history = self.protocol.opening(str(self.task["question"]))

    async def consume(self, reply: str) -> None:
        """Take the model's reply: run its call through the MCP tool, or read its answer."""
        self.replies.append(reply)
        self.history.append({"role": "assistant", "content": reply})
        call = parse_call(reply) if len(self.replies) == 1 else None
        if call is None or len(self.replies) >= MAX_MODEL_CALLS:
            self.answer = parse_answer(reply)
            self.done = True
            return
        result = await self.tools.call("evaluate", {"expression": call.expression})
        self.tool_ok = not result.is_error
        template = self.protocol.error if result.is_error else self.protocol.result
        text = template.format(error=result.text, result=result.text)
        self.history.append({"role": "user", "content": text})

    @property
    def correct(self) -> bool:
        return self.answer is not None and abs(self.answer - float(self.task["answer"])) < 1e-6


def reward(episode: McpEpisode) -> float:
    return (1.0 if episode.correct else 0.0) + (CALL_BONUS if episode.tool_ok else 0.0)


@agentbolt.rollout
async def mcp_calc_agent(task: dict[str, Any], llm: Any, mcp_url: Any = None) -> float | None:
    """Drive one episode through ``llm``; the calculator is the MCP server at the
    ``mcp_url`` resource (a JSON resource holding a URL), else one started for this rollout."""
    import openai

    url = getattr(mcp_url, "value", None)
    server = HttpServer(str(url)) if url else SERVER
    sampling = {"max_tokens": MAX_TOKENS, **dict(llm.sampling_parameters)}
    async with connect(server) as tools, openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none",
                                                            max_retries=5) as client:
        episode = McpEpisode(task, tools)
        while not episode.done:
            response = await client.chat.completions.create(model=llm.model, messages=list(episode.history),
                                                            **sampling)
            await episode.consume(response.choices[0].message.content or "")
    value = reward(episode)
    if agentbolt.current_context() is None:
        return value
    agentbolt.emit_reward(value, correct=float(episode.correct), tool_ok=float(episode.tool_ok))
    return None
