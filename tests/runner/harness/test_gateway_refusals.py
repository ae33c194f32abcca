"""Honest outcomes: a program none of whose model calls succeeded at the gateway (each
got a 4xx or 5xx) fails its attempt with the gateway's reason — even though it exited 0
and its evaluator printed a score — and GRPO's group for the task leaves it out; one
call that succeeded is enough to keep the score."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.algorithms.grpo import GroupMember, compute_advantages
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.runner.harness import Harness
from agentbolt.runner.harness.calls import gateway_calls
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, RolloutConfig, RolloutStatus
from gateway.fakes import FakeEngine
from gateway.scripted_engine import ScriptedEngine
from runner.harness.helpers import ADMIN, PY, Served, script

PROGRAM = """
    import json, os, httpx
    task = json.loads(os.environ["AGENTBOLT_TASK"])
    for _ in range(task.get("calls", 2)):  # the program ignores the answers, as a sloppy one would
        r = httpx.post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", timeout=30,
                       headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
                       json={"model": "m", "messages": [{"role": "user", "content": task["say"]}]})
        print(r.status_code)
"""
GRADER = """
    import json, os
    print(json.loads(os.environ["AGENTBOLT_TASK"])["score"])
"""


@pytest.fixture
def refusing() -> Iterator[Served]:
    """A gateway whose engine has a 64-token context: a long prompt is refused (400)."""
    engine = ScriptedEngine(byte_tokenizer(), ["ok"])
    engine.context_length = 64
    store = MemoryStore()
    gateway = Gateway(engine, GatewayConfig(retry_backoff=0.01))
    with serve_in_thread(store, admin_token=ADMIN, gateway=gateway) as url:
        yield Served(store, url, gateway)


async def test_a_rollout_whose_every_call_was_refused_fails_and_leaves_the_group(refusing: Served,
                                                                                 tmp_path: Path) -> None:
    harness = Harness([PY, script(tmp_path, "prog.py", PROGRAM)], evaluator=[PY, script(tmp_path, "g.py", GRADER)],
                      server_url=refusing.url, sandbox=False)
    tasks = [{"say": "hi", "score": 1.0}, {"say": "hey", "score": 0.0}, {"say": "x" * 100, "score": 0.0}]
    good, bad, refused = await refusing.run(harness, tasks)
    assert (good.status, good.reward, bad.status, bad.reward) == (RolloutStatus.SUCCEEDED, 1.0,
                                                                 RolloutStatus.SUCCEEDED, 0.0)
    assert refused.status == RolloutStatus.FAILED and refused.reward is None  # not a succeeded 0.0
    attempt = await refusing.store.get_attempt(refused.rollout_id, refused.latest_attempt_id)
    assert attempt.status == AttemptStatus.FAILED and refused.attempt_count == 1  # a 400 is not worth a retry
    assert attempt.error.type.endswith("GatewayRefusedError") and attempt.error.retryable is False
    assert "no model call of this attempt succeeded" in attempt.error.message
    assert "the last with 400: prompt is too long" in attempt.error.message  # the gateway's own reason
    advantages = compute_advantages({"task": [GroupMember.from_rollout(r) for r in (good, bad, refused)]})
    assert set(advantages.by_rollout) == {good.rollout_id, bad.rollout_id} and advantages.failed_rollouts == 1
    assert advantages.by_rollout[good.rollout_id] == pytest.approx(0.5)  # the baseline is the mean of the two


async def test_transient_refusals_are_retried_then_failed(tmp_path: Path) -> None:
    engine = FakeEngine()
    store = MemoryStore()
    gateway = Gateway(engine, GatewayConfig(retry_backoff=0.0, max_retries=0))
    with serve_in_thread(store, admin_token=ADMIN, gateway=gateway) as url:
        engine.fail_next = [503] * 100  # the engine is down for every call
        harness = Harness([PY, script(tmp_path, "prog.py", PROGRAM)],
                          evaluator=[PY, script(tmp_path, "g.py", GRADER)], server_url=url, sandbox=False)
        [rollout] = await Served(store, url, gateway).run(harness, [{"say": "hi", "score": 0.0}],
                                                 config=RolloutConfig(max_attempts=2))
    assert rollout.status == RolloutStatus.FAILED and rollout.attempt_count == 2 and rollout.reward is None
    first, second = await store.query_attempts(rollout.rollout_id)
    assert first.error.retryable is True and "the last with 503" in second.error.message


async def test_one_call_that_succeeded_keeps_the_score(refusing: Served, tmp_path: Path) -> None:
    program = script(tmp_path, "prog.py", PROGRAM.replace('task["say"]', '"x" * 100 if _ else "hi"'))
    harness = Harness([PY, program], evaluator=[PY, script(tmp_path, "g.py", GRADER)], server_url=refusing.url,
                      sandbox=False)
    [rollout] = await refusing.run(harness, [{"say": "", "score": 0.0}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 0.0
    calls = gateway_calls(await refusing.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id))
    assert (calls.succeeded, calls.failed) == (1, 1)
