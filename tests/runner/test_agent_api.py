"""The agent forms a user can hand to agentbolt, and how their parameters are filled."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from agentbolt.runner import LitAgent, Runner, as_agent, rollout
from agentbolt import semconv
from agentbolt.runner.agent import AgentParameterError, reward_from_result, split_result
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import emit_reward
from agentbolt.types import LLM, JsonResource, PromptTemplate, Rollout, RolloutMode, RolloutStatus

LLM_RESOURCE = LLM(endpoint="http://127.0.0.1:9/v1", model="tiny", sampling_parameters={"temperature": 0.7})
PROMPT = PromptTemplate(template="Solve: {question}")


async def run_one(store: MemoryStore, agent: Any, task: Any, mode: RolloutMode = RolloutMode.TRAIN) -> Rollout:
    """Enqueue ``task``, run it with ``agent``, return the finished rollout."""
    r = await store.enqueue_rollout(task, mode=mode)
    await Runner(agent, store=store, concurrency=1).run(stop_when_idle=True)
    return await store.get_rollout(r.rollout_id)


# --------------------------------------------------------------------------- decorator
@rollout
def sync_agent(task: dict[str, Any]) -> float:
    return task["x"] * 2.0


@rollout(name="doubler")
async def async_agent(task: dict[str, Any]) -> float:
    await asyncio.sleep(0)
    return task["x"] * 2.0


def test_decorated_function_is_still_callable_and_named() -> None:
    assert sync_agent({"x": 2}) == 4.0
    assert sync_agent.name == "sync_agent"
    assert async_agent.name == "doubler"
    assert asyncio.run(async_agent({"x": 3})) == 6.0
    assert sync_agent.__doc__ is None and sync_agent.__name__ == "sync_agent"


def test_decorated_function_pickles_by_reference() -> None:
    assert pickle.loads(pickle.dumps(sync_agent)) is sync_agent


def test_closure_cannot_be_pickled_and_says_why() -> None:
    def make() -> Any:
        @rollout
        def inner(task: Any) -> None:
            return None

        return inner

    with pytest.raises(pickle.PicklingError, match="inside a function"):
        pickle.dumps(make())


@pytest.mark.parametrize("agent", [sync_agent, async_agent], ids=["sync", "async"])
async def test_decorated_sync_and_async_agents_return_the_reward(store: MemoryStore, agent: Any) -> None:
    done = await run_one(store, agent, {"x": 4})
    assert done.status == RolloutStatus.SUCCEEDED
    assert done.reward == 8.0


# --------------------------------------------------------------------------- injection
async def test_named_parameters_are_injected(store: MemoryStore) -> None:
    seen: dict[str, Any] = {}

    @rollout
    async def agent(task, llm, prompt_template, resources, rollout):  # type: ignore[no-untyped-def]
        seen.update(task=task, llm=llm, prompt=prompt_template, resources=resources, rollout=rollout)
        return 1.0

    await store.add_resources({"llm": LLM_RESOURCE, "prompt_template": PROMPT, "extra": JsonResource(value=[1, 2])})
    done = await run_one(store, agent, {"question": "1+1"})
    assert done.status == RolloutStatus.SUCCEEDED
    assert seen["task"] == {"question": "1+1"}
    assert seen["llm"] == LLM_RESOURCE
    assert seen["prompt"].format(question="2+2") == "Solve: 2+2"
    assert set(seen["resources"]) == {"llm", "prompt_template", "extra"}
    assert seen["rollout"].rollout_id == done.rollout_id
    assert seen["rollout"].resources_version == 1


async def test_first_positional_parameter_gets_the_task_whatever_its_name(store: MemoryStore) -> None:
    got: list[Any] = []

    def agent(sample: Any, llm: LLM) -> None:
        got.append((sample, llm.model))

    await store.add_resources({"main": LLM_RESOURCE})  # found by type, whatever its name
    await run_one(store, agent, "what is 2+2?")
    assert got == [("what is 2+2?", "tiny")]


async def test_resources_can_be_named_directly(store: MemoryStore) -> None:
    got: list[Any] = []

    def agent(task: Any, judge_llm: LLM) -> float:
        got.append(judge_llm.model)
        return 0.0

    await store.add_resources({"judge_llm": LLM_RESOURCE.model_copy(update={"model": "judge"})})
    await run_one(store, agent, 1)
    assert got == ["judge"]


async def test_a_resource_of_a_defaulted_parameters_name_wins_over_the_default(store: MemoryStore) -> None:
    got: list[Any] = []

    def agent(task: Any, planner_llm: LLM | None = None, judge_llm: LLM | None = None) -> float:
        got.append((planner_llm.model if planner_llm else None, judge_llm))
        return 0.0

    await store.add_resources({"planner_llm": LLM_RESOURCE.model_copy(update={"model": "planner"})})
    await run_one(store, agent, 1)
    assert got == [("planner", None)]  # published: the resource; not published: the default


async def test_plain_run_function_reads_rollout_input(store: MemoryStore) -> None:
    def run_fn(rollout: Rollout) -> float:
        return float(rollout.input["a"] + rollout.input["b"])

    done = await run_one(store, run_fn, {"a": 1, "b": 2})
    assert done.reward == 3.0


async def test_parameter_annotated_as_rollout_gets_the_rollout(store: MemoryStore) -> None:
    def run_fn(r: Rollout) -> float:
        assert isinstance(r, Rollout)
        return float(r.input)

    done = await run_one(store, run_fn, 5)
    assert done.reward == 5.0


async def test_var_keyword_receives_everything(store: MemoryStore) -> None:
    got: dict[str, Any] = {}

    def agent(task: Any, **named: Any) -> None:
        got.update(named)

    await run_one(store, agent, 1)
    assert set(got) == {"llm", "prompt_template", "resources", "rollout"}
    assert got["llm"] is None and got["resources"] == {}


async def test_missing_llm_fails_the_attempt_with_advice(store: MemoryStore) -> None:
    def agent(task: Any, llm: LLM) -> float:
        return 1.0

    done = await run_one(store, agent, 1)
    assert done.status == RolloutStatus.FAILED
    attempt = (await store.query_attempts(done.rollout_id))[0]
    assert attempt.error is not None
    assert "AgentParameterError" in attempt.error.type
    assert "asks for 'llm'" in attempt.error.message and "add_resources" in attempt.error.message


async def test_missing_llm_with_a_default_uses_the_default(store: MemoryStore) -> None:
    def agent(task: Any, llm: LLM | None = None) -> float:
        return 1.0 if llm is None else 0.0

    assert (await run_one(store, agent, 1)).reward == 1.0


def test_unknown_required_parameter_is_explained() -> None:
    def agent(task: Any, temperature: float) -> None:
        return None

    entry = as_agent(agent).entry_point(RolloutMode.TRAIN)
    with pytest.raises(AgentParameterError, match="'temperature'"):
        entry.bind(Rollout(rollout_id="ro-1", input=1), None)


# --------------------------------------------------------------------------- LitAgent
class TwoFaced(LitAgent):
    name = "two-faced"

    def training_rollout(self, task: Any, rollout: Rollout) -> float:
        return 0.25

    async def validation_rollout(self, task: Any, **named: Any) -> float:
        assert named["rollout"].mode in (RolloutMode.VAL, RolloutMode.TEST)
        return 0.75


class TrainOnly(LitAgent):
    def training_rollout(self, task: Any) -> None:
        emit_reward(task)


@pytest.mark.parametrize(
    ("mode", "reward"), [(RolloutMode.TRAIN, 0.25), (RolloutMode.VAL, 0.75), (RolloutMode.TEST, 0.75)]
)
async def test_lit_agent_uses_the_entry_point_of_the_mode(store: MemoryStore, mode: RolloutMode, reward: float) -> None:
    done = await run_one(store, TwoFaced(), 1, mode=mode)
    assert done.reward == reward


async def test_lit_agent_validation_defaults_to_training(store: MemoryStore) -> None:
    done = await run_one(store, TrainOnly, 0.5, mode=RolloutMode.VAL)  # a class is instantiated
    assert done.status == RolloutStatus.SUCCEEDED and done.reward == 0.5


def test_lit_agent_name_and_missing_training_rollout() -> None:
    assert as_agent(TwoFaced()).name == "two-faced"
    assert as_agent(TrainOnly()).name == "TrainOnly"

    class Empty(LitAgent):
        pass

    with pytest.raises(TypeError, match="training_rollout"):
        as_agent(Empty())


def test_module_object_reference_is_loaded() -> None:
    agent = as_agent(f"{__name__}:sync_agent")
    assert agent.name == "sync_agent"
    assert agent.entry_point(RolloutMode.TRAIN).fn is sync_agent.fn


def test_things_that_are_not_agents_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot use 42 as an agent"):
        as_agent(42)


# --------------------------------------------------------------------------- results
def test_a_number_is_the_reward_anything_else_is_the_output() -> None:
    assert split_result(None) == (None, None)
    assert split_result(1) == (1.0, None)
    assert split_result(0.5) == (0.5, None)
    assert split_result("the answer") == (None, "the answer")
    assert split_result({"answer": 3}) == (None, {"answer": 3})
    assert split_result(True) == (None, True)  # a bool is not a reward
    assert reward_from_result("yes") is None and reward_from_result(2) == 2.0
    with pytest.raises(ValueError, match="non-finite"):
        split_result(float("nan"))


async def test_returning_none_keeps_emitted_rewards(store: MemoryStore) -> None:
    def agent(task: Any) -> None:
        emit_reward({"acc": 1.0, "fmt": 0.5}, primary="acc")

    done = await run_one(store, agent, 1)
    assert done.reward == 1.0


async def test_returning_an_answer_keeps_it_as_the_output(store: MemoryStore) -> None:
    """The Agent Lightning article's pattern: emit the reward, return the answer."""

    def agent(task: Any) -> str:
        emit_reward(0.5)
        return "the answer"

    done = await run_one(store, agent, 1)
    assert done.status == RolloutStatus.SUCCEEDED and done.reward == 0.5
    spans = await store.get_spans(done.rollout_id, "latest")
    assert semconv.output_of(spans) == (True, "the answer")
    assert [s.name for s in spans].count(semconv.REWARD_SPAN) == 1
