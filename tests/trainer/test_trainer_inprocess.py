"""``Trainer`` with the in-process strategy: fit, the run() form, dev, custom algorithms."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from rich.console import Console

from agentbolt.algorithms import Algorithm, AlgorithmContext, Evaluate, EvaluationResult
from agentbolt.execution import RunnersFailedError
from agentbolt.runner import LitAgent, Runner, rollout
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import emit_message
from agentbolt.trainer import Trainer
from agentbolt.types import LLM, RolloutMode, RolloutStatus

DATA = [{"q": i, "answer": i * 2} for i in range(12)]


@rollout
async def doubling_agent(task: dict[str, Any]) -> float:
    await asyncio.sleep(0.01)
    emit_message(f"q={task['q']}")
    guess = task["q"] * 2 if task["q"] % 3 else -1  # wrong on every third task
    return 1.0 if guess == task["answer"] else 0.0


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def test_fit_with_evaluate_in_process() -> None:
    store = MemoryStore()
    result = Trainer(algorithm=Evaluate(console=quiet()), n_runners=3, store=store).fit(doubling_agent, DATA[:9], DATA)

    assert isinstance(result, EvaluationResult)
    assert result.n_total == 12 and result.n_scored == 12  # the validation set
    assert result.mean_reward == pytest.approx(8 / 12)
    workers = asyncio.run(store.query_workers())
    assert len(workers) == 3  # three runners took part, all gone offline
    assert {w.status.value for w in workers} == {"offline"}


def test_run_form_with_runner_template_and_datasets_in_the_trainer() -> None:
    def run_fn(rollout: Any) -> float:  # the "receives the rollout" form
        return float(rollout.input["q"] % 2)

    trainer = Trainer(
        algorithm=Evaluate(dataset="train", console=quiet()),
        runner=Runner(run_fn=run_fn, concurrency=2),
        train_dataset=DATA,
    )
    result = trainer.run()
    assert result.n_scored == 12 and result.mean_reward == pytest.approx(0.5)


def test_default_algorithm_evaluates_and_resources_are_published() -> None:
    seen: list[str] = []

    class Agent(LitAgent):
        def training_rollout(self, task: Any, llm: LLM) -> float:
            seen.append(f"train:{llm.model}")
            return 1.0

        def validation_rollout(self, task: Any, llm: LLM) -> float:
            seen.append(f"val:{llm.model}")
            return 1.0

    trainer = Trainer(resources={"llm": LLM(endpoint="http://127.0.0.1:1/v1", model="m1")})
    trainer.algorithm = Evaluate(console=quiet())
    result = trainer.fit(Agent(), train_dataset=[1, 2])
    assert result.n_scored == 2 and seen == ["val:m1", "val:m1"]


def test_custom_algorithm_gets_store_and_datasets_and_its_result_is_returned() -> None:
    class TwoPhases(Algorithm):
        async def run(self, ctx: AlgorithmContext) -> dict[str, Any]:
            train = await ctx.run_dataset(ctx.train_dataset or [], RolloutMode.TRAIN)
            val = await ctx.run_dataset(ctx.val_dataset or [], "val")
            return {
                "train": [r.status for r in train],
                "val_rewards": [r.reward for r in val],
            }

    out = Trainer(algorithm=TwoPhases(), n_runners=2).fit(lambda task: float(task), [1, 2, 3], [4, 5])
    assert out == {"train": [RolloutStatus.SUCCEEDED] * 3, "val_rewards": [4.0, 5.0]}


def test_hooks_given_to_the_trainer_reach_every_runner() -> None:
    ended: list[str] = []

    class Count:
        def on_rollout_end(self, rollout: Any, spans: Any) -> None:
            ended.append(rollout.rollout_id)

    Trainer(algorithm=Evaluate(console=quiet()), n_runners=2, hooks=Count()).fit(lambda task: 1.0, [1, 2, 3, 4])
    assert len(set(ended)) == 4


def test_an_algorithm_error_stops_the_runners_and_propagates() -> None:
    class Broken(Algorithm):
        async def run(self, ctx: AlgorithmContext) -> None:
            await ctx.run_dataset([1])
            raise RuntimeError("bad update step")

    with pytest.raises(RuntimeError, match="bad update step"):
        Trainer(algorithm=Broken()).fit(lambda task: 1.0, [1])


def test_fit_inside_an_event_loop_points_to_fit_async() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match="fit_async"):
            Trainer().fit(lambda task: 1.0, [1])
        result = await Trainer(algorithm=Evaluate(console=quiet())).fit_async(lambda task: 1.0, [1])
        assert result.n_scored == 1

    asyncio.run(main())


def test_run_without_a_runner_explains() -> None:
    with pytest.raises(TypeError, match="runner=agentbolt.Runner"):
        Trainer().run()


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown execution strategy"):
        Trainer(strategy="threads")


def test_runners_failing_to_start_end_the_fit() -> None:
    class NeverDone(Algorithm):
        async def run(self, ctx: AlgorithmContext) -> None:
            await asyncio.sleep(30)

    class BrokenStore(MemoryStore):
        async def update_worker(self, *args: Any, **kwargs: Any) -> Any:
            raise ConnectionError("store unreachable")

    with pytest.raises(RunnersFailedError, match="every runner stopped"):
        Trainer(algorithm=NeverDone(), store=BrokenStore()).fit(lambda task: 1.0, [1])


def test_dev_prints_traces_and_returns_rollouts() -> None:
    out = io.StringIO()
    results = Trainer().dev(doubling_agent, DATA, n=2, console=Console(file=out, width=120))

    assert len(results) == 2
    assert all(r.rollout.status == RolloutStatus.SUCCEEDED for r in results)
    text = out.getvalue()
    assert "rollout 0" in text and "rollout 1" in text
    assert "agentbolt.rollout" in text and "agentbolt.message" in text
    assert "reward = 1.0" in text
    assert "q=0" in text  # key attributes are shown
    assert "training samples" in text


def test_dev_shows_failures() -> None:
    def agent(task: Any) -> float:
        raise KeyError("missing field")

    out = io.StringIO()
    [result] = Trainer().dev(agent, [{"x": 1}], console=Console(file=out, width=120))
    assert result.rollout.status == RolloutStatus.FAILED
    assert result.error is not None and "KeyError" in result.error
    assert "agentbolt.exception" in out.getvalue()
