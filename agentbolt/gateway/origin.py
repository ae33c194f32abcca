"""Who made a proxied call: the agent's name and the caller's span, read from the request.

The gateway knows the rollout attempt of every call from its URL; in a multi-agent
system it also needs the **agent** that made it, so that ``agent_match`` selects the
right calls on the path that trains. A call names its agent, first found wins:

1. a suffix of the model name: ``"model": "<model>#<agent>"`` (e.g. ``"smollm2#solver"``)
   — the suffix is removed before the call goes to the engine, so any program that lets
   you set the model name can name its agent;
2. the ``X-Agentbolt-Agent: <agent>`` header — agentbolt's tracer adds it to the model
   calls it instruments (the name of ``agentbolt.agent(...)``, of a LangGraph node, of an
   OpenAI Agents SDK / AutoGen / CrewAI agent); a harnessed program can send it itself
   (``OpenAI(default_headers={"X-Agentbolt-Agent": "solver"})``); the value is
   percent-decoded, so a name outside ASCII can travel as ``%C3%A9``.

A W3C ``traceparent`` header (the tracer sends it too) makes the gateway's span a child
of the caller's span, in the caller's trace: the call then sits in the agent's trace
tree, and adapters can find the agent's name among its ancestors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from agentbolt.semconv import AGENT_HEADER, TRACEPARENT_HEADER

__all__ = [
    "AGENT_HEADER",
    "MAX_AGENT_NAME",
    "MODEL_AGENT_SEPARATOR",
    "TRACEPARENT_HEADER",
    "CallOrigin",
    "origin_of",
    "parse_traceparent",
    "split_model_agent",
]

MODEL_AGENT_SEPARATOR = "#"
MAX_AGENT_NAME = 200

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True, slots=True)
class CallOrigin:
    """The agent that made a call and the span it was made from (each None if unknown)."""

    agent_name: str | None = None
    trace_id: str | None = None
    """32 hex digits: the caller's trace."""
    parent_span_id: str | None = None
    """16 hex digits: the caller's span, parent of the gateway's span."""


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """``(trace_id, parent_span_id)`` of a W3C ``traceparent`` value, or None when it is
    missing or malformed (an all-zero id is invalid, version ``ff`` is forbidden)."""
    if not value:
        return None
    found = _TRACEPARENT.match(value.strip().lower())
    if found is None:
        return None
    version, trace_id, span_id, _flags = found.groups()
    if version == "ff" or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return trace_id, span_id


def split_model_agent(model: Any) -> tuple[Any, str | None]:
    """``("m", "solver")`` for ``"m#solver"``; ``(model, None)`` without a suffix (or
    when ``model`` is not a string). The last ``#`` separates the agent."""
    if not isinstance(model, str) or MODEL_AGENT_SEPARATOR not in model:
        return model, None
    base, _, agent = model.rpartition(MODEL_AGENT_SEPARATOR)
    return base, _clean(agent)


def origin_of(headers: Mapping[str, str], body: dict[str, Any]) -> tuple[CallOrigin, dict[str, Any]]:
    """The origin of a call, and its body with any agent suffix taken off the model name
    (a new dict; ``body`` is not changed)."""
    model, from_model = split_model_agent(body.get("model"))
    if from_model is not None or model != body.get("model"):
        body = {**body, "model": model}
    header = headers.get(AGENT_HEADER)
    agent = from_model or _clean(unquote(header) if header is not None else None)
    parent = parse_traceparent(headers.get(TRACEPARENT_HEADER))
    trace_id, span_id = parent if parent is not None else (None, None)
    return CallOrigin(agent, trace_id, span_id), body


def _clean(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.strip()
    return name[:MAX_AGENT_NAME] if name else None
