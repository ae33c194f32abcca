"""``agentlightning.litagent`` on agentbolt: :class:`LitAgent` is agentbolt's own (it runs
``rollout``/``rollout_async``/``training_rollout``/``validation_rollout``); the decorators
make agentbolt rollout functions, whose ``llm``/``prompt_template``/``resources``/
``rollout`` parameters agentbolt fills by name (and by type)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentbolt.runner.agent import LitAgent, RolloutFunction, rollout

__all__ = ["LitAgent", "llm_rollout", "prompt_rollout", "rollout"]


def llm_rollout(func: Callable[..., Any] | None = None, *, strip_proxy: bool = True) -> Any:
    """An agent taking ``(task, llm)`` (and optionally ``rollout``). The LLM it gets is
    already scoped to the attempt, so ``strip_proxy`` has nothing to do."""
    if func is None:
        return lambda f: RolloutFunction(f)
    return RolloutFunction(func)


def prompt_rollout(func: Callable[..., Any] | None = None) -> Any:
    """An agent taking ``(task, prompt_template)`` (and optionally ``rollout``)."""
    if func is None:
        return lambda f: RolloutFunction(f)
    return RolloutFunction(func)
