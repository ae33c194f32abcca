"""``critic="gateway"``: the critic and editor are the run's own engine, called in
process (no rollout, no recorded span), and agents get ``llm = gateway_llm()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.fakes import FakeEngine

from agentbolt import LLM
from agentbolt.algorithms import APO
from agentbolt.gateway import Gateway
from agentbolt.runner.gateway_llm import GATEWAY_ENDPOINT
from agentbolt.store.memory import MemoryStore
from algorithms.apo.scripted_llm import ScriptedLLM, scripted_reply
from algorithms.apo.world import INITIAL, config, resources, run_apo, tasks


class ScriptedEngine(FakeEngine):
    """The fake engine answering chat calls by the scripted critic/editor rules."""

    def __init__(self) -> None:
        super().__init__()
        self.rules = ScriptedLLM()

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        self.calls.append((body, replica))
        content = scripted_reply(body, self.rules)
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "policy",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}


def test_the_runs_own_engine_can_be_critic_and_editor(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    store = MemoryStore()
    apo = APO(config(tmp_path, rounds=1), initial_prompt=INITIAL, critic="gateway")
    result = run_apo(apo, tasks(), tasks(), store=store, gateway=Gateway(engine))
    assert len(engine.rules.critic_requests) == 2 and len(engine.rules.editor_requests) == 2
    assert result.best.mean_val == 0.25 and result.best.round == 1
    llm = resources(store)[-1].resources["llm"]
    assert isinstance(llm, LLM) and llm.endpoint == GATEWAY_ENDPOINT  # agents would reach the engine
