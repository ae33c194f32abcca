"""Tell the gateway which agent makes a model call, and from which span.

A model call that goes through agentbolt's gateway is recorded twice: by the agent's
instrumented client and by the gateway. The gateway's span is the one that trains (it has
the policy version), so it must know the agent's name too. While a rollout attempt is
active, every HTTP request the agent sends with ``httpx`` or ``httpx2`` (the clients under
``openai``, LangChain's ``ChatOpenAI``, LiteLLM and the OpenAI Agents SDK) **to that attempt's
gateway** — a URL with ``/rollout/<rollout id>/attempt/<attempt id>/`` in its path, or
one of the attempt's LLM endpoints — gets two headers, unless it already has them:

* ``X-Agentbolt-Agent``: the agent making the call (:func:`agent_for_call`),
  percent-encoded;
* ``traceparent`` (W3C Trace Context): the span the call is made from, so that the
  gateway's span joins the agent's trace as its child.

Requests to anywhere else are left alone. Each request with the attempt's
``/rollout/…/attempt/…/`` path is counted on the attempt
(``AttemptContext.calls.to_gateway``, for the runner's "no recorded model call" check).

The agent's name at the moment of the call is, first found wins: the innermost
``agentbolt.agent(...)`` block; the name stamped on the current span or its nearest
ancestor (a block entered in another thread); the LangGraph node running the call
(LangChain's runnable config). Names that frameworks write on their
spans only when those end (the OpenAI Agents SDK's agent spans) are not known yet: the
adapters take them from the client's twin of the gateway's span instead
(:mod:`agentbolt.adapters.calls`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
import threading
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from opentelemetry import trace

from agentbolt.semconv import AGENT_HEADER, TRACEPARENT_HEADER
from agentbolt.tracing.context import (
    AttemptContext,
    current_agent_name,
    current_context,
)
from agentbolt.tracing.processor import router
from agentbolt.types import LLM

__all__ = ["AGENT_HEADER", "HTTP_CLIENTS", "TRACEPARENT_HEADER", "agent_for_call", "install", "stamp_headers"]

log = logging.getLogger("agentbolt.tracing")

_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")
_lock = threading.Lock()
_installed: list[str] = []


HTTP_CLIENTS = ("httpx", "httpx2")
"""Modules whose ``Client`` / ``AsyncClient`` get the headers (``openai`` 3 uses ``httpx2``)."""


def install() -> list[str]:
    """Add the headers to the requests of the ``Client`` and ``AsyncClient`` of every
    installed module of :data:`HTTP_CLIENTS` (once per process). Returns those modules."""
    with _lock:
        for name in HTTP_CLIENTS:
            if name in _installed or importlib.util.find_spec(name) is None:
                continue
            module = importlib.import_module(name)
            module.Client.send = _sync_send(module.Client.send)
            module.AsyncClient.send = _async_send(module.AsyncClient.send)
            _installed.append(name)
        return list(_installed)


def _sync_send(original: Any) -> Any:
    @functools.wraps(original)
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        _stamp_quietly(request)
        return original(self, request, *args, **kwargs)

    return send


def _async_send(original: Any) -> Any:
    @functools.wraps(original)
    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        _stamp_quietly(request)
        return await original(self, request, *args, **kwargs)

    return send


def _stamp_quietly(request: Any) -> None:
    try:
        stamp_headers(request)
    except Exception:
        log.debug("could not add agentbolt's headers to a request", exc_info=True)


def stamp_headers(request: Any) -> bool:
    """Add the agent and traceparent headers to an ``httpx.Request`` for the current
    attempt's gateway, and count it (``AttemptContext.calls``); returns whether it is such
    a request."""
    ctx = current_context()
    url = str(request.url)
    if ctx is None or not is_gateway_url(url, ctx):
        return False
    if _attempt_in_path(url) is not None:  # the gateway's URL of this attempt: it records the call
        ctx.calls.to_gateway += 1
    headers = request.headers
    if AGENT_HEADER not in headers:
        name = agent_for_call()
        if name:
            headers[AGENT_HEADER] = quote(name, safe=_SAFE)
    if TRACEPARENT_HEADER not in headers:
        parent = trace.get_current_span().get_span_context()
        if parent.is_valid and router.knows(parent.span_id):
            headers[TRACEPARENT_HEADER] = f"00-{parent.trace_id:032x}-{parent.span_id:016x}-01"
    return True


def is_gateway_url(url: str, ctx: AttemptContext) -> bool:
    """Whether ``url`` is a model call of ``ctx``'s attempt through the gateway (or to one
    of the attempt's LLM endpoints)."""
    at = _attempt_in_path(url)
    if at is not None:
        return at == (ctx.rollout_id, ctx.attempt_id)
    resources = ctx.resources.resources.values() if ctx.resources is not None else ()
    endpoints = [r.endpoint for r in resources if isinstance(r, LLM)]
    return any(isinstance(e, str) and e and url.startswith(e.rstrip("/") + "/") for e in endpoints)


def _attempt_in_path(url: str) -> tuple[str, str] | None:
    """The (rollout id, attempt id) of a gateway URL's ``/rollout/<id>/attempt/<id>/`` path."""
    parts = [unquote(p) for p in urlsplit(url).path.split("/")]
    for i in range(len(parts) - 3):
        if parts[i] == "rollout" and parts[i + 2] == "attempt":
            return parts[i + 1], parts[i + 3]
    return None


def agent_for_call() -> str | None:
    """The name of the agent running here (see module doc), or None."""
    name = current_agent_name()
    if name:
        return name
    span = trace.get_current_span().get_span_context()
    name = router.agent_of(span.span_id) if span.is_valid else None
    return name or _langgraph_node()


def _langgraph_node() -> str | None:
    """The LangGraph node whose code is running (from LangChain's runnable config)."""
    config_module = sys.modules.get("langchain_core.runnables.config")
    if config_module is None:
        return None
    var = getattr(config_module, "var_child_runnable_config", None)  # third-party: LangChain's module varies by version
    config = var.get() if var is not None else None
    metadata = config.get("metadata") if isinstance(config, dict) else None
    node = metadata.get("langgraph_node") if isinstance(metadata, dict) else None
    return node if isinstance(node, str) and node else None
