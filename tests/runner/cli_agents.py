"""Agents the ``agentbolt runner`` tests load by reference (``cli_agents:...``)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from agentbolt.runner import LitAgent, rollout
from agentbolt.tracing import emit_message


@rollout
async def echo_agent(task: dict[str, Any]) -> float:
    await asyncio.sleep(0.02)
    emit_message(f"pid {os.getpid()} ran task {task['i']}")
    return 1.0


class ClassAgent(LitAgent):
    def training_rollout(self, task: Any) -> float:
        return 0.5
