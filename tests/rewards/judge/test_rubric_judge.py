"""``RubricJudge``: one call per rollout against a rubric — inside a Python agent (the
judge span and the reward land in the running rollout), and after the fact on a group."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

import agentbolt
from agentbolt import semconv
from agentbolt.adapters.calls import extract_model_calls
from agentbolt.rewards.judge import MalformedJudgeAnswerError, RubricJudge, ScriptedJudgeClient, Trajectory
from agentbolt.store.memory import MemoryStore
from agentbolt.types import RolloutStatus
from rewards.judge.groups import finished_group, last_answer, shown_data

RUBRIC = "The answer to the task is 51. Score 1 for 51, 0 otherwise."


def _grader(messages: Any) -> str:
    shown = shown_data(messages)
    answer = last_answer(shown["trajectory"])
    return orjson.dumps({"score": 1.0 if answer == "51" else 0.0, "rationale": f"it says {answer}"}).decode()


async def test_inside_an_agent_the_reward_and_the_judge_call_are_recorded_in_the_rollout() -> None:
    judge = RubricJudge(ScriptedJudgeClient(_grader), RUBRIC, name="rubric")

    @agentbolt.rollout
    async def agent(task: dict[str, Any]) -> None:
        messages = [{"role": "user", "content": task["question"]}, {"role": "assistant", "content": task["say"]}]
        await judge.reward(Trajectory.from_messages(messages, task=task))

    store = MemoryStore()
    right = await store.enqueue_rollout({"question": "17 * 3?", "say": "51"})
    wrong = await store.enqueue_rollout({"question": "17 * 3?", "say": "50"})
    await agentbolt.Runner(agent, store=store, concurrency=2).run(stop_when_idle=True)

    assert [(await store.get_rollout(r.rollout_id)).reward for r in (right, wrong)] == [1.0, 0.0]
    spans = await store.get_spans(wrong.rollout_id, "latest")
    (judged,) = [s for s in spans if s.name == semconv.JUDGE_SPAN]
    (reward,) = [s for s in spans if s.name == semconv.REWARD_SPAN]
    assert judged.attributes[semconv.JUDGE_KIND] == "rubric" and judged.attributes[semconv.JUDGE_SCORE] == 0.0
    assert reward.attributes[semconv.JUDGE_RATIONALE] == "it says 50"
    assert RUBRIC in orjson.loads(judged.attributes[semconv.JUDGE_REQUEST])[1]["content"]
    assert extract_model_calls(spans) == []  # the judge's call is not one of the agent's model calls


async def test_a_malformed_answer_inside_an_agent_fails_the_attempt_instead_of_making_a_reward() -> None:
    judge = RubricJudge(ScriptedJudgeClient(lambda m: "Looks good to me!"), RUBRIC, retries=0)

    @agentbolt.rollout
    async def agent(task: dict[str, Any]) -> None:
        await judge.reward(Trajectory.from_messages([{"role": "assistant", "content": "51"}], task=task))

    store = MemoryStore()
    rollout = await store.enqueue_rollout({"q": 1}, config=agentbolt.RolloutConfig(max_attempts=1))
    await agentbolt.Runner(agent, store=store).run(stop_when_idle=True)

    done = await store.get_rollout(rollout.rollout_id)
    assert done.status == RolloutStatus.FAILED and done.reward is None
    (attempt,) = await store.query_attempts(rollout.rollout_id)
    assert attempt.error is not None and attempt.error.type.endswith("MalformedJudgeAnswerError")
    spans = await store.get_spans(rollout.rollout_id)
    (judged,) = [s for s in spans if s.name == semconv.JUDGE_SPAN]
    assert judged.status == "error" and judged.attributes[semconv.JUDGE_RESPONSE] == "Looks good to me!"


async def test_after_the_fact_each_succeeded_rollout_of_a_group_is_scored_on_its_own() -> None:
    store = MemoryStore()
    rollouts = await finished_group(store, ["51", "50", "51"], fail=[2])
    client = ScriptedJudgeClient(_grader)

    scored = await RubricJudge(client, RUBRIC).score_group(store, rollouts)

    assert len(client.calls) == 2  # one per succeeded rollout
    assert [r.reward for r in scored] == [1.0, 0.0, None]


async def test_one_failed_call_leaves_the_whole_group_unscored() -> None:
    store = MemoryStore()
    rollouts = await finished_group(store, ["51", "oops"], rewards=[1.0, 0.0])

    def grader(messages: Any) -> str:
        return _grader(messages) if last_answer(shown_data(messages)["trajectory"]) == "51" else "no idea"

    with pytest.raises(MalformedJudgeAnswerError):
        await RubricJudge(ScriptedJudgeClient(grader), RUBRIC, retries=0).score_group(store, rollouts)
    # no partial rewards: the rollout the judge could score keeps its own reward too
    assert [(await store.get_rollout(r.rollout_id)).reward for r in rollouts] == [1.0, 0.0]
    for r in rollouts:
        names = [s.name for s in await store.get_spans(r.rollout_id)]
        assert names.count(semconv.JUDGE_SPAN) == 1 and names.count(semconv.REWARD_SPAN) == 1
