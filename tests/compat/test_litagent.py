"""A ``LitAgent`` written for v0.3 — ``rollout``/``rollout_async`` with ``(task,
resources, rollout)``, ``LitAgent[T]``, ``trained_agents`` — runs unchanged."""

from __future__ import annotations

from typing import Any

import pytest

import agentbolt as agl


class EchoLength(agl.LitAgent[str]):
    """Sync ``rollout``: the reward is the task's length divided by a resource."""

    def rollout(self, task: str, resources: agl.NamedResources, rollout: agl.Rollout) -> float:
        assert isinstance(rollout, agl.Rollout) and rollout.input == task
        scale = resources["scale"]
        return len(task) / float(scale.value)


class AsyncAgent(agl.LitAgent[dict]):
    def __init__(self) -> None:
        super().__init__(trained_agents="solver.*")

    async def rollout_async(self, task: dict[str, Any], resources: agl.NamedResources, rollout: agl.Rollout) -> None:
        agl.emit_reward(task["score"])


class Moded(agl.LitAgent[str]):
    def training_rollout(self, task: str, resources: Any, rollout: Any) -> float:
        return 1.0

    async def validation_rollout_async(self, task: str, resources: Any, rollout: Any) -> float:
        return 0.5


async def _run(agent: Any, task: Any, mode: str | None = None) -> float | None:
    store = agl.InMemoryLightningStore()
    runner = agl.LitAgentRunner(agl.OtelTracer())
    with runner.run_context(agent=agent, store=store):
        rollout = await runner.step(task, resources={"scale": agl.JsonResource(value=2)}, mode=mode)
        assert rollout.status == "succeeded"
        return agl.find_final_reward(await store.query_spans(rollout.rollout_id))


async def test_a_sync_rollout_method_is_the_entry_point() -> None:
    assert await _run(EchoLength(), "abcd") == 2.0


async def test_an_async_rollout_method_is_the_entry_point() -> None:
    agent = AsyncAgent()
    assert agent.trained_agents == "solver.*"
    assert await _run(agent, {"score": 0.25}) == 0.25


async def test_training_and_validation_methods_are_picked_by_mode() -> None:
    assert await _run(Moded(), "x", mode="train") == 1.0
    assert await _run(Moded(), "x", mode="val") == 0.5


def test_trainer_fit_runs_a_rollout_method_agent() -> None:
    result = agl.Trainer(n_workers=1, initial_resources={"scale": agl.JsonResource(value=1)}).fit(
        EchoLength(), ["ab", "abc"])
    assert sorted(row.reward for row in result.rows) == [2.0, 3.0]


def test_a_litagent_without_any_entry_point_is_refused_with_the_names_to_define() -> None:
    with pytest.raises(TypeError, match="rollout / rollout_async"):
        agl.Trainer().fit(agl.LitAgent(), ["x"])
