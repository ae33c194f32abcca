"""The rollout every framework of the matrix runs in: the task names the agent
(``module:function`` of :mod:`frameworks.agents`, or of a module only its own venv can
import), the rollout hands it the ``llm`` resource's endpoint and key, and the reward says
whether it answered 5. Imports nothing but agentbolt, so a runner in a framework's own
venv loads it too (``agentbolt runner --agent frameworks.in_rollout:framework_rollout``)."""

from __future__ import annotations

from typing import Any

import agentbolt
from agentbolt.runner.loading import load_object
from agentbolt.types import LLM

__all__ = ["framework_rollout"]


@agentbolt.rollout
def framework_rollout(task: dict[str, Any], llm: LLM) -> float:
    agent = load_object(task["agent"])
    return 1.0 if "5" in agent(llm.endpoint, llm.api_key or "none") else 0.0
