"""Port of v0.3's ``examples/apo/apo_debug.py``: three ways to debug an agent — a bare
runner, a runner with a hook, and ``Trainer.dev``. Imports changed to ``agentbolt.compat``."""

from __future__ import annotations

from typing import Any, cast

from agentbolt.compat import Trainer
from agentbolt.compat.litagent import LitAgent
from agentbolt.compat.runner import LitAgentRunner
from agentbolt.compat.store import InMemoryLightningStore
from agentbolt.compat.tracer import AgentOpsTracer, OtelTracer
from agentbolt.compat.types import Dataset, Hook, PromptTemplate, Rollout
from tests.compat.programs.apo_custom_algorithm import QUESTION, apo_rollout

PROMPT = PromptTemplate(template="You are a helpful assistant. {any_question}", engine="f-string")


async def debug_with_runner() -> tuple[Rollout, InMemoryLightningStore]:
    runner = LitAgentRunner[str](OtelTracer())
    store = InMemoryLightningStore()
    with runner.run_context(agent=apo_rollout, store=store):
        rollout = await runner.step(QUESTION, resources={"main_prompt": PROMPT})
    return rollout, store


async def debug_with_hooks() -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    class DebugHook(Hook):
        async def on_trace_end(  # type: ignore[override]
            self, *, agent: LitAgent[str], runner: LitAgentRunner[str], tracer: AgentOpsTracer, rollout: Rollout
        ) -> None:
            for span in tracer.get_last_trace():
                seen.append((span.name, span.status))

    runner = LitAgentRunner[str](AgentOpsTracer())
    with runner.run_context(agent=apo_rollout, store=InMemoryLightningStore(), hooks=[DebugHook()]):
        await runner.step(QUESTION, resources={"main_prompt": PROMPT})
    return seen


def debug_with_trainer() -> Any:
    dataset = cast(Dataset[str], [QUESTION, "What's the capital of France?"])
    trainer = Trainer(n_workers=1, initial_resources={"main_prompt": PROMPT})
    return trainer.dev(apo_rollout, dataset)
