"""The SQL agent: a LangGraph graph that writes a query, runs it, checks it and rewrites it.

    START -> model --(a query)--> run_sql --(turns left)--> model ... --> END

* ``model`` asks the LLM (through ``llm.endpoint``: agentbolt's gateway in training) for
  the next step: a query to run, or ``DONE`` to accept the last result;
* ``run_sql`` runs the query read-only with a time limit (``grader.execute``) inside an
  ``agentbolt.operation("run_sql")`` span — input the query, output a preview of the
  rows or the error — so each attempt shows up in the dashboard's trace view;
* at most ``max_turns`` model calls (default 3); a first reply with no query is nudged
  once (``protocol.NUDGE``), a repeated query or ``DONE`` ends the episode.

The reward is the execution match of the last query that ran (``grader.score``): 1.0
when its result equals the gold query's, else 0.0. How the model is asked — text or
function tools — and the turn limit come from the optional JSON resource ``sql_agent``
(``{"protocol": "text" | "tools", "max_turns": 3}``), so a GPU config changes them
without touching this code. The prompt is the resource ``prompt_template`` (APO's lever)
or :data:`protocol.INITIAL_PROMPT`.

Importing this module does no work (runner processes import it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from grader import execute, preview, score
from protocol import (
    DEFAULT_MAX_TURNS,
    INITIAL_PROMPT,
    MAX_TOKENS,
    NUDGE,
    RUN_SQL_TOOL,
    feedback,
    first_messages,
    parse_sql,
    says_done,
)

import agentbolt

__all__ = ["AgentSettings", "build_graph", "settings_of", "sql_agent"]


class AgentSettings(TypedDict):
    protocol: str
    max_turns: int


class SQLState(TypedDict):
    """The graph's state: the conversation, the queries run, what to do next."""

    messages: list[dict[str, Any]]
    queries: list[str]
    pending: str | None
    pending_call_id: str | None
    calls: int
    done: bool


def settings_of(resources: dict[str, Any] | None) -> AgentSettings:
    """The ``sql_agent`` JSON resource's settings, with defaults."""
    raw = (resources or {}).get("sql_agent")
    value = getattr(raw, "value", raw) or {}
    protocol = str(value.get("protocol", "text"))
    if protocol not in ("text", "tools"):
        raise ValueError(f"sql_agent resource: protocol must be 'text' or 'tools', not {protocol!r}")
    return {"protocol": protocol, "max_turns": int(value.get("max_turns", DEFAULT_MAX_TURNS))}


async def _run_sql(task: dict[str, Any], query: str) -> tuple[str, bool]:
    """Run ``query`` as a traced operation; the preview the model reads, and whether it ran."""
    with agentbolt.operation("run_sql", db_id=str(task.get("db_id", ""))) as op:
        op.set_input(query)
        result = await asyncio.to_thread(execute, task["db_path"], query)
        text = preview(result)
        op.set_output(text)
        op.set_attribute("sql.ok", result.ok)
        op.set_attribute("sql.rows", len(result.rows))
        if result.error:
            op.set_attribute("sql.error", result.error)
    return text, result.ok


def build_graph(task: dict[str, Any], llm: Any, client: Any, settings: AgentSettings) -> Any:
    """The compiled LangGraph for one episode (``client``: an ``openai.AsyncOpenAI``)."""
    try:
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        raise ImportError("the SQL agent is a LangGraph graph: run `pip install 'agentbolt[langchain]'` "
                          "(or `pip install langgraph`)") from None

    tools = settings["protocol"] == "tools"
    sampling = {"max_tokens": MAX_TOKENS, **dict(llm.sampling_parameters)}

    async def model(state: SQLState) -> dict[str, Any]:
        extra = {"tools": [RUN_SQL_TOOL]} if tools else {}
        response = await client.chat.completions.create(model=llm.model, messages=state["messages"],
                                                         **extra, **sampling)
        message = response.choices[0].message
        content = message.content or ""
        calls = state["calls"] + 1
        tool_calls = list(message.tool_calls or []) if tools else []
        if tool_calls:
            call = tool_calls[0]
            try:
                query = str(json.loads(call.function.arguments or "{}").get("query") or "")
            except json.JSONDecodeError:
                query = ""
            assistant = {"role": "assistant", "content": content or None,
                         "tool_calls": [{"id": call.id, "type": "function",
                                         "function": {"name": call.function.name,
                                                      "arguments": call.function.arguments}}]}
            return {"messages": [*state["messages"], assistant], "pending": query or None,
                    "pending_call_id": call.id, "calls": calls, "done": not query}
        messages = [*state["messages"], {"role": "assistant", "content": content}]
        query = parse_sql(content)
        if query is None or (state["queries"] and query == state["queries"][-1]):
            if not state["queries"] and not says_done(content) and calls == 1 < settings["max_turns"]:
                return {"messages": [*messages, {"role": "user", "content": NUDGE}], "pending": None,
                        "calls": calls, "done": False}
            return {"messages": messages, "pending": None, "calls": calls, "done": True}
        return {"messages": messages, "pending": query, "pending_call_id": None, "calls": calls, "done": False}

    async def run_sql(state: SQLState) -> dict[str, Any]:
        query = state["pending"] or ""
        text, ok = await _run_sql(task, query)
        if state["pending_call_id"] is not None:
            reply = {"role": "tool", "tool_call_id": state["pending_call_id"], "content": text}
        else:
            reply = {"role": "user", "content": feedback(text, ok)}
        return {"messages": [*state["messages"], reply], "queries": [*state["queries"], query],
                "pending": None, "pending_call_id": None}

    def after_model(state: SQLState) -> str:
        if state["pending"]:
            return "run_sql"
        return END if state["done"] else "model"

    def after_run(state: SQLState) -> str:
        return "model" if state["calls"] < settings["max_turns"] else END

    graph = StateGraph(SQLState)
    graph.add_node("model", model)
    graph.add_node("run_sql", run_sql)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", after_model, {"run_sql": "run_sql", "model": "model", END: END})
    graph.add_conditional_edges("run_sql", after_run, {"model": "model", END: END})
    return graph.compile()


async def solve(task: dict[str, Any], llm: Any, template: str, settings: AgentSettings) -> SQLState:
    """Run one episode; the final state (``queries[-1]`` is the answer)."""
    import openai

    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5) as client:
        graph = build_graph(task, llm, client, settings)
        start: SQLState = {"messages": first_messages(template, task, settings["protocol"]),  # type: ignore[arg-type]
                           "queries": [], "pending": None, "pending_call_id": None, "calls": 0, "done": False}
        return await graph.ainvoke(start, {"recursion_limit": 4 * settings["max_turns"] + 4})


@agentbolt.rollout
async def sql_agent(task: dict[str, Any], llm: agentbolt.LLM,
                    prompt_template: agentbolt.PromptTemplate | str | None = None,
                    resources: dict[str, Any] | None = None) -> float | None:
    """Answer ``task["question"]`` over ``task["db_path"]``; reward 1.0 for a matching result.

    Inside a rollout it emits ``reward`` with ``executed`` (the final query ran) and
    ``turns`` beside it and returns None; called directly it returns the reward.
    """
    template = INITIAL_PROMPT if prompt_template is None else getattr(prompt_template, "template", prompt_template)
    settings = settings_of(resources)
    state = await solve(task, llm, str(template), settings)
    final = state["queries"][-1] if state["queries"] else None
    value = await asyncio.to_thread(score, task["db_path"], final, task["gold"])
    if agentbolt.current_context() is None:
        return value
    executed = final is not None and (await asyncio.to_thread(execute, task["db_path"], final)).ok
    agentbolt.emit_reward(value, executed=float(executed), turns=float(state["calls"]))
    return None
