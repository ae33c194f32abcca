"""Auto-instrumentation of the model clients and agent frameworks people use.

agentbolt switches on the OpenInference instrumentors (``openinference-instrumentation-openai``,
``-anthropic``, ``-langchain``, ``-litellm``, ``-openai-agents``, ``-autogen-agentchat``, ``-crewai``, ``-dspy``,
``-smolagents``, ``-google-adk``), PydanticAI's own spans (:mod:`agentbolt.tracing.pydantic_ai`)
and a span per LlamaIndex agent step (:mod:`agentbolt.tracing.llama_index`),
bound to agentbolt's process-wide TracerProvider, so their spans reach the rollout
they belong to. Each is switched on once per process, when its library is imported —
right away if it already is — so a library that is installed but unused costs no
import time. A library whose instrumentor is not installed is skipped (with a debug
log); install ``agentbolt[tracing]`` to get them all.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agentbolt.tracing.processor import shared_provider

__all__ = ["LIBRARIES", "instrument", "instrumented_libraries"]

log = logging.getLogger("agentbolt.tracing")


@dataclass(frozen=True)
class _Library:
    name: str
    """The library's import name, e.g. ``"openai"``."""
    instrumentor: str
    """``module:Class`` of its OpenInference instrumentor."""
    trace_config: tuple[tuple[str, bool], ...] = ()
    """OpenInference ``TraceConfig`` settings for it."""


_RAW_JSON_IS_ENOUGH = (("hide_input_messages", True), ("hide_output_messages", True), ("hide_llm_tools", True))
"""The openai instrumentation records the request and response JSON, from which agentbolt
normalises the span: its flattened copies of messages and tools would only cost time."""

LIBRARIES: tuple[_Library, ...] = (
    _Library("openai", "openinference.instrumentation.openai:OpenAIInstrumentor", _RAW_JSON_IS_ENOUGH),
    _Library("anthropic", "openinference.instrumentation.anthropic:AnthropicInstrumentor"),
    _Library("langchain_core", "openinference.instrumentation.langchain:LangChainInstrumentor"),
    _Library("litellm", "openinference.instrumentation.litellm:LiteLLMInstrumentor"),
    _Library("agents", "openinference.instrumentation.openai_agents:OpenAIAgentsInstrumentor"),
    _Library("autogen_agentchat", "openinference.instrumentation.autogen_agentchat:AutogenAgentChatInstrumentor"),
    _Library("crewai", "openinference.instrumentation.crewai:CrewAIInstrumentor"),
    _Library("dspy", "openinference.instrumentation.dspy:DSPyInstrumentor"),
    _Library("smolagents", "openinference.instrumentation.smolagents:SmolagentsInstrumentor"),
    _Library("google.adk", "openinference.instrumentation.google_adk:GoogleADKInstrumentor"),
    _Library("pydantic_ai", "agentbolt.tracing.pydantic_ai:PydanticAIInstrumentor"),
    _Library("llama_index.core", "agentbolt.tracing.llama_index:LlamaIndexInstrumentor"),
)
"""What agentbolt instruments when installed: the ``openai`` client (sync, async, chat
completions, completions, responses, streaming, tool calls), the ``anthropic`` client
(Messages, streaming, tool use; package ``openinference-instrumentation-anthropic``), LangChain and LangGraph
(through ``langchain_core``), LiteLLM, and the agent frameworks whose spans name the
agent of each model call: the OpenAI Agents SDK (``agents``, package
``openinference-instrumentation-openai-agents``), AutoGen AgentChat
(``openinference-instrumentation-autogen-agentchat``) and CrewAI
(``openinference-instrumentation-crewai``); and DSPy (``openinference-instrumentation-dspy``:
a span per ``dspy.LM`` call with its messages, since DSPy 3.4 sends the request through
an HTTP transport of its own that no client instrumentor sees); smolagents and Google ADK
(their OpenInference instrumentors) and PydanticAI (its own spans, ``gen_ai.agent.name``),
for their agents' names; LlamaIndex's workflow agents (:mod:`agentbolt.tracing.llama_index`: a
span naming the agent around each of its steps, since LlamaIndex names it on no span).
LlamaIndex's and Haystack's OpenInference instrumentors are left off: they name no agent,
and LlamaIndex's records its own model-call span beside the client's (each call would
count twice). The OpenAI Agents SDK's instrumentor replaces
the SDK's default trace processors (which upload traces to OpenAI) with its own."""

_lock = threading.Lock()
_hooked: set[str] = set()
_done: set[str] = set()


def instrument(libraries: Iterable[str] | None = None) -> list[str]:
    """Switch on instrumentation of the given libraries (default: all of :data:`LIBRARIES`
    that are installed). Idempotent. Returns the libraries that will be instrumented
    (now, or when they are first imported)."""
    wanted = {lib.name for lib in LIBRARIES} if libraries is None else set(libraries)
    unknown = wanted - {lib.name for lib in LIBRARIES}
    if unknown:
        raise ValueError(f"agentbolt cannot instrument {sorted(unknown)}; it knows {[lib.name for lib in LIBRARIES]}")
    hooked: list[str] = []
    for lib in LIBRARIES:
        if lib.name not in wanted:
            continue
        with _lock:
            if lib.name in _hooked:
                hooked.append(lib.name)
                continue
            if not _installed(lib.name):
                continue
            if not _installed(lib.instrumentor.split(":")[0]):
                log.debug("%s is installed but its instrumentor %s is not; not tracing it", lib.name, lib.instrumentor)
                continue
            _hooked.add(lib.name)
        hooked.append(lib.name)
        import wrapt  # installed with every OpenInference instrumentor

        wrapt.register_post_import_hook(_hook_for(lib), lib.name)
    return hooked


def instrumented_libraries() -> set[str]:
    """Libraries whose instrumentation is active in this process."""
    with _lock:
        return set(_done)


def _hook_for(lib: _Library) -> Callable[[ModuleType], None]:
    def hook(module: ModuleType) -> None:
        with _lock:
            if lib.name in _done:
                return
            _done.add(lib.name)
        module_name, cls_name = lib.instrumentor.split(":")
        try:
            cls = getattr(importlib.import_module(module_name), cls_name)  # third-party: an instrumentor, by name
            instrumentor = cls()
            kwargs: dict[str, object] = {"tracer_provider": shared_provider()}
            if lib.trace_config:
                from openinference.instrumentation import TraceConfig

                options: dict[str, Any] = dict(lib.trace_config)
                kwargs["config"] = TraceConfig(**options)
            instrumentor.instrument(**kwargs)
        except Exception:  # noqa: BLE001 — tracing must never break the user's import
            with _lock:
                _done.discard(lib.name)
            log.warning("could not switch on tracing of %s", lib.name, exc_info=True)

    return hook


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
