"""``GroupJudge``: RULER — one judge call scores a GRPO group's trajectories against each other.

GRPO only needs each rollout's reward *relative to its group* (A_i = r_i − mean), so a
judge that sees the G attempts at one task side by side and ranks them gives a sharper
signal than G separate absolute scores, with one call instead of G (OpenPipe ART's RULER).

::

    judge = GroupJudge(OpenAIJudgeClient("gpt-4.1-mini"), rubric="Prefer correct answers ...")
    GRPO(config, group_reward=judge)            # GRPO scores every group before its update

The trajectories are shown in an order shuffled per group (seeded by their ids, so a run
is repeatable) under labels "1".."G", which keeps the judge from favouring a position or
an id; the opening of the conversation they all share (system prompt, task) is shown
once. Ties are allowed: equal scores give equal rewards, and a group scored all equal
carries no signal (GRPO drops it).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

from agentbolt.rewards.judge.ask import ask
from agentbolt.rewards.judge.client import JudgeClient
from agentbolt.rewards.judge.errors import JudgeError
from agentbolt.rewards.judge.load import load_trajectories
from agentbolt.rewards.judge.prompt import DEFAULT_GROUP_RUBRIC, group_prompt
from agentbolt.rewards.judge.record import Verdict, failure_spans, verdict_spans
from agentbolt.rewards.judge.trajectory import Trajectory
from agentbolt.rewards.judge.verdict import parse_group_answer
from agentbolt.store.base import Store
from agentbolt.types import Rollout

__all__ = ["GroupJudge"]


class GroupJudge:
    """Scores the trajectories of one task's group in one call to ``client``.

    * ``rubric`` — what makes one trajectory better than another (default: RULER's);
    * ``name`` — the reward it writes (primary: it becomes the rollout's reward);
    * ``retries`` — how many times a malformed answer is asked again;
    * ``max_tokens`` — the judge's answer budget (a rationale per trajectory).
    """

    def __init__(self, client: JudgeClient, *, rubric: str = DEFAULT_GROUP_RUBRIC, name: str = "judge",
                 retries: int = 1, max_tokens: int = 2048, shuffle: bool = True) -> None:
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries}")
        self.client = client
        self.rubric = rubric
        self.name = name
        self.retries = retries
        self.max_tokens = max_tokens
        self.shuffle = shuffle

    async def judge(self, trajectories: Sequence[Trajectory]) -> list[Verdict]:
        """One verdict per trajectory, in the order given (one call)."""
        if len(trajectories) < 1:
            raise ValueError("a group judge needs at least one trajectory")
        ids = [t.rollout_id for t in trajectories]
        if len(set(ids)) != len(ids):
            raise ValueError(f"the trajectories' rollout ids must differ (got {ids}): they name the scores")
        order = list(range(len(trajectories)))
        if self.shuffle:
            random.Random("|".join(sorted(ids))).shuffle(order)
        shared = _common_opening([t.messages for t in trajectories]) if len(trajectories) > 1 else []
        labelled = {str(n + 1): dataclasses.replace(trajectories[i], messages=trajectories[i].messages[len(shared):])
                    for n, i in enumerate(order)}
        labels = list(labelled)
        messages = group_prompt(_task_of(trajectories), shared, labelled, self.rubric)
        scores, call = await ask(self.client, messages, lambda text: parse_group_answer(text, labels),
                                 max_tokens=self.max_tokens, retries=self.retries)
        by_rollout = {trajectories[i].rollout_id: scores[str(n + 1)] for n, i in enumerate(order)}
        return [Verdict(rid, by_rollout[rid].score, by_rollout[rid].rationale, call) for rid in ids]

    async def score_group(self, store: Store, rollouts: Sequence[Rollout]) -> list[Rollout]:
        """Judge the group's succeeded rollouts together, write each one's judge and
        reward spans, and return ``rollouts`` read again (with their new rewards).
        Fewer than two succeeded: nothing to compare, no call. A failed judge call writes
        error spans and raises its :class:`JudgeError`."""
        judged = await load_trajectories(store, rollouts)
        if len(judged) < 2:
            return list(rollouts)
        group = [j.rollout.rollout_id for j in judged]
        try:
            verdicts = await self.judge([j.trajectory for j in judged])
        except JudgeError as exc:
            await store.add_spans([s for j in judged for s in failure_spans(exc, j.where, kind="group", name=self.name,
                                                                            group=group)])
            raise
        await store.add_spans([s for j, v in zip(judged, verdicts, strict=True)
                               for s in verdict_spans(v, j.where, kind="group", name=self.name, group=group)])
        page = await store.query_rollouts(rollout_ids=[r.rollout_id for r in rollouts], limit=len(rollouts))
        fresh = {r.rollout_id: r for r in page.items}
        return [fresh.get(r.rollout_id, r) for r in rollouts]


def _common_opening(conversations: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The messages every conversation starts with (never a whole conversation: each
    keeps at least its last message)."""
    shortest = min(len(c) for c in conversations)
    n = 0
    while n < shortest - 1 and all(c[n] == conversations[0][n] for c in conversations):
        n += 1
    return conversations[0][:n]


def _task_of(trajectories: Sequence[Trajectory]) -> Any:
    tasks = [t.task for t in trajectories]
    return tasks[0] if all(t == tasks[0] for t in tasks) else {"per_trajectory": "tasks differ; see each trajectory"}
