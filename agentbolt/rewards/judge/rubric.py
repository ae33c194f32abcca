"""``RubricJudge``: one judge call per rollout, scoring it against a rubric.

Three ways to use it:

* inside a Python agent — ``await judge.reward(Trajectory.from_messages(messages, task=task))``
  judges, records the judge span and emits the reward in the running rollout;
* after the rollouts, from GRPO — ``GRPO(config, group_reward=judge)`` scores every
  succeeded rollout of each group (one call each) before the update: this is how a
  harness program's rollouts get a judge's reward (the judge reads the model calls the
  gateway recorded);
* on its own — ``await judge.judge(trajectory)`` returns the :class:`Verdict`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from opentelemetry.trace import Status, StatusCode

from agentbolt import semconv
from agentbolt.rewards.judge.ask import ask
from agentbolt.rewards.judge.client import JudgeClient
from agentbolt.rewards.judge.errors import JudgeError
from agentbolt.rewards.judge.load import load_trajectories
from agentbolt.rewards.judge.prompt import DEFAULT_RUBRIC, rubric_prompt
from agentbolt.rewards.judge.record import Verdict, failure_spans, judge_attributes, verdict_spans
from agentbolt.rewards.judge.trajectory import Trajectory
from agentbolt.rewards.judge.verdict import parse_rubric_answer
from agentbolt.store.base import Store
from agentbolt.tracing.context import require_context
from agentbolt.tracing.emitters import emit_reward
from agentbolt.types import Rollout

__all__ = ["RubricJudge"]


class RubricJudge:
    """Scores one trajectory at a time against ``rubric`` with ``client``; ``name`` is
    the reward it writes, ``retries`` how often a malformed answer is asked again."""

    def __init__(self, client: JudgeClient, rubric: str = DEFAULT_RUBRIC, *, name: str = "rubric",
                 retries: int = 1, max_tokens: int = 512, concurrency: int = 8) -> None:
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries}")
        self.client = client
        self.rubric = rubric
        self.name = name
        self.retries = retries
        self.max_tokens = max_tokens
        self.concurrency = concurrency

    async def judge(self, trajectory: Trajectory) -> Verdict:
        """The verdict on ``trajectory`` (one call, plus retries of malformed answers)."""
        score, call = await ask(self.client, rubric_prompt(trajectory, self.rubric), parse_rubric_answer,
                                max_tokens=self.max_tokens, retries=self.retries)
        return Verdict(trajectory.rollout_id, score.score, score.rationale, call)

    async def reward(self, trajectory: Trajectory) -> float:
        """Inside a rollout: judge ``trajectory``, record the judge span and emit the
        score as the reward ``name`` (with the rationale); returns the score. A failed
        judge records its error span and raises (the attempt fails: no reward is made up)."""
        ctx = require_context()
        tracer = ctx.tracer.otel_tracer
        try:
            verdict = await self.judge(trajectory)
        except JudgeError as exc:
            span = tracer.start_span(semconv.JUDGE_SPAN, attributes={
                **judge_attributes(exc.call, kind="rubric", name=self.name, group=[ctx.rollout_id]),
                semconv.EXCEPTION_TYPE: type(exc).__name__, semconv.EXCEPTION_MESSAGE: str(exc)})
            span.set_status(Status(StatusCode.ERROR, str(exc)[:1000]))
            span.end()
            raise
        call = verdict.call
        span = tracer.start_span(semconv.JUDGE_SPAN, start_time=int(call.start_time * 1e9), attributes={
            **judge_attributes(call, kind="rubric", name=self.name, group=[ctx.rollout_id]),
            semconv.JUDGE_SCORE: verdict.score, semconv.JUDGE_RATIONALE: verdict.rationale})
        span.end(end_time=int(call.end_time * 1e9))
        emit_reward({self.name: verdict.score}, primary=self.name,
                    attributes={semconv.JUDGE_RATIONALE: verdict.rationale, semconv.JUDGE_CALL_ID: call.call_id})
        return verdict.score

    async def score_group(self, store: Store, rollouts: Sequence[Rollout]) -> list[Rollout]:
        """Judge each succeeded rollout of ``rollouts`` (concurrently), write its judge and
        reward spans, and return ``rollouts`` read again. If any call fails, the error is
        recorded on the rollouts it failed for and raised: a group judged in part would
        compare scores with rewards of another kind."""
        judged = await load_trajectories(store, rollouts)
        if not judged:
            return list(rollouts)
        slots = asyncio.Semaphore(self.concurrency)

        async def one(trajectory: Trajectory) -> Verdict:
            async with slots:
                return await self.judge(trajectory)

        results = await asyncio.gather(*(one(j.trajectory) for j in judged), return_exceptions=True)
        spans = []
        failure: JudgeError | None = None
        for j, result in zip(judged, results, strict=True):
            group = [j.rollout.rollout_id]
            if isinstance(result, JudgeError):
                failure = failure or result
                spans += failure_spans(result, j.where, kind="rubric", name=self.name, group=group)
            elif isinstance(result, BaseException):
                raise result
            else:
                spans += verdict_spans(result, j.where, kind="rubric", name=self.name, group=group)
        if failure is not None:
            await store.add_spans([s for s in spans if s.name == semconv.JUDGE_SPAN])
            raise failure
        await store.add_spans(spans)
        page = await store.query_rollouts(rollout_ids=[r.rollout_id for r in rollouts], limit=len(rollouts))
        fresh = {r.rollout_id: r for r in page.items}
        return [fresh.get(r.rollout_id, r) for r in rollouts]
