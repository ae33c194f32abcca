"""LlamaIndex's workflow agents, named on a span around each of their steps.

LlamaIndex's agents (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``, and the agents
of an ``AgentWorkflow``) have names, but no span names them: LlamaIndex's own
instrumentation and its OpenInference package (``openinference-instrumentation-llama-index``)
write no agent name, and the latter records each model call a second time beside the
client's span. So agentbolt leaves that package off and wraps the workflow step that
makes an agent's model calls — ``run_agent_step``, of a single agent and of an
``AgentWorkflow`` — in an ``invoke_agent <name>`` span with ``gen_ai.agent.name``, the
agent the step runs (``AgentSetup.current_agent_name``). The model calls inside are
recorded by the ``openai`` client's instrumentor (or the gateway) as usual.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentbolt import semconv

__all__ = ["LlamaIndexInstrumentor"]

_STEPS = (
    ("llama_index.core.agent.workflow.base_agent", "BaseWorkflowAgent.run_agent_step"),
    ("llama_index.core.agent.workflow.multi_agent_workflow", "AgentWorkflow.run_agent_step"),
)
"""The workflow steps that call ``take_step``, the agent's model calls."""


class LlamaIndexInstrumentor:
    """``instrument(tracer_provider=...)``: every LlamaIndex workflow agent's step runs in
    a span of ``tracer_provider`` that names the agent."""

    def instrument(self, *, tracer_provider: Any, **_: Any) -> None:
        import wrapt

        tracer = tracer_provider.get_tracer("agentbolt.llama_index")

        async def named_step(
            wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Any:
            name = agent_of_step(args, kwargs)
            if name is None:
                return await wrapped(*args, **kwargs)
            attributes = {semconv.GEN_AI_OPERATION: "invoke_agent", semconv.GEN_AI_AGENT_NAME: name}
            with tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes):
                return await wrapped(*args, **kwargs)

        for module, method in _STEPS:  # when first imported: ``llama_index.core`` does not import them
            wrapt.register_post_import_hook(_wrapping(method, named_step), module)


def _wrapping(method: str, wrapper: Callable[..., Awaitable[Any]]) -> Callable[[Any], None]:
    def hook(module: Any) -> None:
        import wrapt

        wrapt.wrap_function_wrapper(module, method, wrapper)

    return hook


def agent_of_step(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The agent a ``run_agent_step(ctx, ev)`` call runs: its event's ``current_agent_name``."""
    event = kwargs["ev"] if "ev" in kwargs else (args[1] if len(args) > 1 else None)
    name = getattr(event, "current_agent_name", None)  # third-party: LlamaIndex's AgentSetup event
    return name if isinstance(name, str) and name else None
