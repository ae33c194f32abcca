"""``APO.set_initial_resources``: the guide's second way to give APO its prompt."""

from __future__ import annotations

import pytest

import agentbolt
from agentbolt.compat import APO, LLM, PromptTemplate


def _prompt() -> PromptTemplate:
    return PromptTemplate(template="You are a helpful assistant. {question}", engine="f-string")


def test_the_prompt_is_optimised_under_its_own_key_and_the_trainer_publishes_the_resources() -> None:
    algo = APO(None)
    llm = LLM(endpoint="http://m/v1", model="m")
    algo.set_initial_resources({"this_is_also_valid_key": _prompt(), "main_llm": llm})
    assert algo.config.prompt_name == "this_is_also_valid_key"
    assert algo.get_initial_resources() == {"this_is_also_valid_key": _prompt(), "main_llm": llm}
    trainer = agentbolt.Trainer(algorithm=algo)
    assert trainer.resources == {"this_is_also_valid_key": _prompt(), "main_llm": llm}


def test_the_trainers_own_resources_win() -> None:
    algo = APO(None)
    algo.set_initial_resources({"a": _prompt()})
    trainer = agentbolt.Trainer(algorithm=algo, initial_resources={"b": _prompt()})
    assert trainer.resources == {"b": _prompt()}


@pytest.mark.parametrize("resources", [{}, {"a": _prompt(), "b": _prompt()}])
def test_exactly_one_prompt_is_required(resources: dict[str, PromptTemplate]) -> None:
    with pytest.raises(ValueError, match="exactly one PromptTemplate"):
        APO(None).set_initial_resources(resources)
