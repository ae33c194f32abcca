"""Every other spelling listed in ``agentbolt.aliases`` works and means the agentbolt name
the table gives: the table is where the aliases are defined, and these tests keep the code
that accepts them true to it."""

from __future__ import annotations

from typing import Any

import pytest

import agentbolt
from agentbolt import aliases
from agentbolt.compat.trainer_args import looks_v03, map_arguments
from agentbolt.execution import strategy_from
from agentbolt.runner.agent import LitAgent, as_agent
from agentbolt.types import AttemptStatus, RolloutConfig, RolloutMode


@pytest.mark.parametrize(("other", "name"), sorted(aliases.STRATEGIES.items()))
def test_every_spelling_of_a_strategy_gives_that_strategy(other: str, name: str) -> None:
    assert type(strategy_from(other)) is type(strategy_from(name))
    assert type(strategy_from(other.upper())) is type(strategy_from(name))


@pytest.mark.parametrize(("other", "name"), sorted({**aliases.V03_STRATEGIES, **aliases.V03_STRATEGY_CLASSES}.items()))
def test_agent_lightning_strategy_names_map_onto_agentbolt_ones(other: str, name: str) -> None:
    strategy: Any = other if other in aliases.V03_STRATEGIES else {"type": f"agentlightning.{other}"}
    assert looks_v03(None, None, strategy, None)
    assert map_arguments({"strategy": strategy}, {})["strategy"] == name


def test_agent_lightning_trainer_arguments_become_agentbolt_ones() -> None:
    resources = {"prompt": agentbolt.PromptTemplate(template="{x}")}
    out = map_arguments({}, {"initial_resources": resources, "n_workers": 3})
    assert {k: out[v] for k, v in aliases.V03_TRAINER_ARGUMENTS.items() if k != "triplet_exporter"} == {
        "initial_resources": resources, "n_workers": 3}


def test_run_fn_is_the_runner_agent() -> None:
    assert aliases.KEYWORDS["Runner"] == {"run_fn": "agent"}

    def solve(task: Any) -> float:
        return 1.0

    by_alias, by_name = agentbolt.Runner(run_fn=solve).agent, agentbolt.Runner(agent=solve).agent
    assert by_alias is not None and by_name is not None
    assert by_alias.source is by_name.source is solve
    with pytest.raises(TypeError, match="not both"):
        agentbolt.Runner(solve, run_fn=solve)


def test_retry_condition_is_retry_on() -> None:
    assert aliases.other_keywords("RolloutConfig", "retry_on") == ("retry_condition",)
    config = RolloutConfig.model_validate({"retry_condition": ["failed"]})
    assert config.retry_on == [AttemptStatus.FAILED] == RolloutConfig(retry_on=["failed"]).retry_on


@pytest.mark.parametrize("method", aliases.LITAGENT_TRAINING_METHODS)
def test_a_lit_agent_may_name_its_training_entry_point_any_listed_way(method: str) -> None:
    def entry(self: Any, task: Any) -> float:
        return 1.0

    agent = as_agent(type("Agent", (LitAgent,), {method: entry}))
    assert getattr(agent.entry_point(RolloutMode.TRAIN).fn, "__func__", None) is entry


@pytest.mark.parametrize("method", aliases.LITAGENT_VALIDATION_METHODS)
def test_a_lit_agent_may_name_its_validation_entry_point_any_listed_way(method: str) -> None:
    def train(self: Any, task: Any) -> float:
        return 1.0

    def entry(self: Any, task: Any) -> float:
        return 0.0

    agent = as_agent(type("Agent", (LitAgent,), {"training_rollout": train, method: entry}))
    assert getattr(agent.entry_point(RolloutMode.VAL).fn, "__func__", None) is entry


def test_primary_key_is_emit_reward_primary() -> None:
    from agentbolt.tracing.emitters import emit_reward

    assert aliases.other_keywords("emit_reward", "primary") == ("primary_key",)
    with pytest.raises(ValueError, match="give one"):
        emit_reward({"acc": 1.0, "fmt": 0.5}, primary="fmt", primary_key="acc")
