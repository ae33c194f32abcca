"""A real small GRPO run whose rollouts have the shape of a coding harness's, into a SQLite
store: for the dashboard's lineage and row-accounting pages.

Each rollout talks to a seeded random tiny byte-level model (:func:`agentbolt.models.tiny_model`,
the in-process transformers engine) through the model gateway, so the spans carry the
engine's token ids and logprobs, and names no agent (a harness does not know about
agentbolt):

1. ``m1`` — the main agent (system prompt :data:`MAIN_SYSTEM`) reads the issue;
2. ``s1``, ``s2`` — it hands a search to a sub-agent (Task-tool style): a conversation
   of its own, with its own system prompt :data:`EXPLORER_SYSTEM`, two turns;
3. ``m2`` — the main agent continues its conversation with the sub-agent's report;
4. ``m3``, ``m4`` — its context is compacted: it re-sends its system prompt and a short
   summary instead of the history, and carries on for one more turn.

The reward grades the last answer by its first character against the task's ``fix``
(partial credit: how close it is), so rollouts of one task differ. Two of the four tasks
have no fix (an issue that cannot be reproduced: every answer scores 0), as a real
dataset has tasks too hard for the policy: with ``shuffle=False`` they form step 2, whose
two groups carry no signal, so the step trains nothing and the rows table says why.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

import agentbolt
from agentbolt.algorithms.grpo import GRPO, GRPOConfig
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import tiny_model
from agentbolt.semconv import GATEWAY_SCOPE, LLM_PROMPT_TOKEN_IDS, SCOPE_NAME
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import RolloutMode, RolloutStatus, Span

RUN_NAME = "lineage-real-run"
MAIN_SYSTEM = (
    "You are the main coding agent. Read the issue, ask the explorer where the code is, "
    "then write the fix in one line."
)
"""Over :data:`~agentbolt.adapters.lineage.MIN_DIVERGED_PREFIX` bytes (one token each with
the byte tokenizer): the compacted prompt shares it, so it reads as ``diverged``."""
EXPLORER_SYSTEM = "Explorer: search the repository and report the file and line asked for."
"""The sub-agent's: it differs from :data:`MAIN_SYSTEM` from its first character on."""
SUMMARY = "Summary of the work so far: the explorer looked; the issue is {issue}"
TASKS = [
    {"issue": "Fix: the parser drops the last line.", "fix": "p"},
    {"issue": "Fix: the cache never expires.", "fix": "c"},
    {"issue": "Fix: the build fails on a machine nobody has.", "fix": ""},
    {"issue": "Fix: a crash reported once, without a trace.", "fix": ""},
]
"""Steps take two tasks each, in order: step 1 the two that have a fix, step 2 the two
that have none."""
STEPS, TASKS_PER_STEP, GROUP_SIZE = 2, 2, 4
CALLS = ("m1", "s1", "s2", "m2", "m3", "m4")
"""The calls of a rollout, in order (see the module doc)."""


def grade(answer: str, fix: str) -> float:
    """Partial credit: 1 when the answer starts with ``fix``'s character, less the further
    its first character is from it; 0 without an answer or when the task has no fix."""
    if not answer or not fix:
        return 0.0
    return max(0.0, 1.0 - abs(ord(answer[0]) - ord(fix)) / 256)


async def coding_agent(task: dict[str, str], llm: agentbolt.LLM) -> float:
    """The main agent, its explorer sub-agent and a context compaction (see the module doc)."""
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)

    async def turn(messages: list[dict[str, str]], user: str | None = None) -> str:
        if user is not None:
            messages.append({"role": "user", "content": user})
        reply = await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=3)  # type: ignore[arg-type]
        answer = reply.choices[0].message.content or ""
        messages.append({"role": "assistant", "content": answer})
        return answer

    async with client:
        main = [{"role": "system", "content": MAIN_SYSTEM}]
        await turn(main, task["issue"])  # m1
        explorer = [{"role": "system", "content": EXPLORER_SYSTEM}]
        await turn(explorer, f"Where is this code? {task['issue']}")  # s1
        report = await turn(explorer, "Look one level deeper.")  # s2
        await turn(main, f"Explorer report: {report}")  # m2
        compacted = [{"role": "system", "content": MAIN_SYSTEM}]  # the history replaced by a summary
        await turn(compacted, SUMMARY.format(issue=task["issue"]))  # m3
        answer = await turn(compacted, "Write the fix now.")  # m4
    return grade(answer, task["fix"])


@dataclass(frozen=True)
class LineageRun:
    """Where :func:`run_lineage_grpo` left its run."""

    path: Path
    run_id: str
    steps: int


async def run_lineage_grpo(path: Path) -> LineageRun:
    """Train :func:`coding_agent` with GRPO for :data:`STEPS` steps into the SQLite store at
    ``path`` (no evaluation, no checkpoint); about ten seconds of CPU."""
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engine = TransformersEngine(model, tokenizer, max_batch_size=16, num_threads=1, default_max_tokens=3)
    with tempfile.TemporaryDirectory() as run_dir:
        config = GRPOConfig(
            max_steps=STEPS, tasks_per_step=TASKS_PER_STEP, group_size=GROUP_SIZE, shuffle=False, learning_rate=1e-3,
            lora=None, eval_before=False, eval_after=False, checkpoint_every=0, run_dir=run_dir, run_name=RUN_NAME,
            progress=False,
        )
        trainer = agentbolt.Trainer(
            algorithm=GRPO(config), store=SqliteStore(path), runner=agentbolt.Runner(concurrency=GROUP_SIZE * 2),
            gateway=Gateway(engine, GatewayConfig(retry_after=1)),
        )
        result: Any = await trainer.fit_async(coding_agent, TASKS)
    return LineageRun(path=path, run_id=RUN_NAME, steps=result.steps)


async def gateway_calls(store: Any, rollout_id: str) -> dict[str, Span]:
    """The gateway's span of each call of :data:`CALLS` in a rollout (the client's twin spans
    left out), by name: the agent awaits each call before the next, so start order is call order."""
    spans = [s for s in await store.get_spans(rollout_id)
             if s.attributes.get(SCOPE_NAME) == GATEWAY_SCOPE and LLM_PROMPT_TOKEN_IDS in s.attributes]
    assert len(spans) == len(CALLS), f"{len(spans)} gateway calls in {rollout_id}, not {len(CALLS)}"
    return dict(zip(CALLS, sorted(spans, key=lambda s: s.start_time), strict=True))


@dataclass
class StepRows:
    """What a step did with its rollouts, read from the rollouts (status, reward, group)."""

    rows_in: int = 0
    trained: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    equal_groups: int = 0


async def step_rows(store: Any, steps: int) -> dict[int, StepRows]:
    """Per step (1, 2...), its rows as the run's own rollouts account for them: the sync
    schedule hands step k the groups started k-th (``group_seq``); a rollout that did not
    succeed is ``failed``; the others of a group whose rewards are all equal are
    ``zero_variance``; the rest trained. (No judge, no ``agent_match``, ``overlong="keep"``
    and the sync schedule leave no other reason in this run.)"""
    rollouts = (await store.query_rollouts(mode=RolloutMode.TRAIN, limit=1000)).items
    groups: dict[int, list[Any]] = defaultdict(list)
    for r in rollouts:
        groups[int(r.metadata["group_seq"])].append(r)
    out: dict[int, StepRows] = {}
    for step in range(1, steps + 1):
        rows = out[step] = StepRows()
        for seq in range((step - 1) * TASKS_PER_STEP, step * TASKS_PER_STEP):
            members = groups[seq]
            ok = [r for r in members if r.status == RolloutStatus.SUCCEEDED]
            rows.rows_in += len(members)
            if len(members) > len(ok):
                rows.dropped["failed"] = rows.dropped.get("failed", 0) + len(members) - len(ok)
            if len({r.reward for r in ok}) <= 1:
                rows.equal_groups += 1
                rows.dropped["zero_variance"] = rows.dropped.get("zero_variance", 0) + len(ok)
            else:
                rows.trained += len(ok)
    return out
