"""Acceptance (issue 4): a Python script that knows nothing about agentbolt, run by the
controller for 20 rollouts with concurrency 4 — server and gateway in front of a fake
OpenAI server, real HTTP all the way.

* every model call is attributed to the right rollout (the script's request content
  names its task, and the gateway's span for it lands in that task's rollout);
* rewards are recorded by an evaluator command;
* a deliberately hanging script is killed at its timeout and retried, then succeeds
  (it hangs on its first attempt only, via a marker file).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAI, serve_fake_openai

from agentbolt.runner.harness import Harness
from agentbolt.engines import VLLMEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.runner.runner import Runner
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import (
    AttemptStatus,
    RolloutConfig,
    RolloutCreate,
    RolloutStatus,
    Span,
)
from runner.harness.helpers import ADMIN, PY, script

N_TASKS = 20
CONCURRENCY = 4
HANGING_TASK = "t07"

# Plain stdlib: what any OpenAI-compatible program does, in any language.
PROGRAM = """
import json, os, sys, time, urllib.request

task = json.loads(os.environ["AGENTBOLT_TASK"])
log_dir = sys.argv[1]
start = time.time()

def chat(content):
    body = json.dumps({"model": "any-model", "messages": [{"role": "user", "content": content}]}).encode()
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body, method="POST",
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)["choices"][0]["message"]["content"]

plan = chat(f"task {task['id']}: plan for {task['question']}")
marker = os.path.join(log_dir, task["id"] + ".started")
if task.get("hang_once") and not os.path.exists(marker):
    open(marker, "w").close()
    time.sleep(120)  # stuck: the controller must kill it
answer = chat(f"task {task['id']}: answer {task['question']}")
print(answer)
with open(os.path.join(log_dir, f"{task['id']}-{os.getpid()}.span"), "w") as f:
    json.dump([start, time.time()], f)
"""

EVALUATOR = """
import json, os, sys
task = json.loads(os.environ["AGENTBOLT_TASK"])
answer = sys.stdin.read()
correct = answer.strip() == f"echo: task {task['id']}: answer {task['question']}"
print(json.dumps({"value": task["weight"] if correct else 0.0}))
"""


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as url:
        yield url


def _model_calls(spans: list[Span]) -> list[Span]:
    return [s for s in spans if "agentbolt.llm.request" in s.attributes]


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.timeout(120)
async def test_twenty_unmodified_programs_through_the_gateway(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    started = time.monotonic()
    logs = tmp_path / "logs"
    logs.mkdir()
    program = script(tmp_path, "agent.py", PROGRAM)
    evaluator = script(tmp_path, "grade.py", EVALUATOR)
    tasks = [
        {"id": f"t{i:02d}", "question": f"what is {i} + {i}?", "weight": round(0.05 * i, 2), "hang_once": f"t{i:02d}" == HANGING_TASK}
        for i in range(N_TASKS)
    ]
    store = MemoryStore()
    gateway = Gateway(VLLMEngine(str(fake_llm)), GatewayConfig(span_flush_interval=0.01))
    with serve_in_thread(store, admin_token=ADMIN, gateway=gateway) as server:
        harness = Harness(
            [PY, program, str(logs)], evaluator=[PY, evaluator], timeout=3.0, concurrency=CONCURRENCY,
            server_url=server, sandbox=False,  # the programs log into the test's folder
        )
        config = RolloutConfig(max_attempts=3)
        created = await store.enqueue_rollouts(
            [RolloutCreate(input=t, rollout_id=f"ro-{t['id']}", config=config) for t in tasks]
        )
        # the runner would take more at once: the harness's limit is what holds it to 4
        runner = Runner(harness, store=store, concurrency=2 * CONCURRENCY, heartbeat_interval=0.5, poll_interval=0.05)
        await runner.run(stop_when_idle=True)
        rollouts = {r.rollout_id: await store.get_rollout(r.rollout_id) for r in created}

        # every call the fake model got was recorded by the gateway (spans land asynchronously)
        n_requests = len(fake_llm.bodies("/v1/chat/completions"))
        deadline = time.monotonic() + 10
        while True:
            spans = {rid: await store.get_spans(rid) for rid in rollouts}
            if sum(len(_model_calls(s)) for s in spans.values()) >= n_requests or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)

    # all succeeded, each with the reward its evaluator gave
    for task in tasks:
        rollout = rollouts[f"ro-{task['id']}"]
        assert rollout.status == RolloutStatus.SUCCEEDED, (task["id"], rollout.status)
        assert rollout.reward == pytest.approx(task["weight"]), task["id"]

    # attribution: each model call sits in the rollout whose task it names
    assert n_requests == 2 * N_TASKS + 1  # the hanging attempt made one call before it hung
    recorded = 0
    for task in tasks:
        rid = f"ro-{task['id']}"
        calls = _model_calls(spans[rid])
        recorded += len(calls)
        for call in calls:
            request = json.loads(call.attributes["agentbolt.llm.request"])
            assert request["messages"][-1]["content"].startswith(f"task {task['id']}:"), (rid, request)
            assert call.attributes.get("agentbolt.llm.response_token_ids"), "the engine's token ids were recorded"
        succeeded_attempt = rollouts[rid].latest_attempt_id
        assert len([c for c in calls if c.attempt_id == succeeded_attempt]) == 2
    assert recorded == n_requests

    # the hanging script: killed at its timeout, retried, then fine — and never scored 0
    hung = rollouts[f"ro-{HANGING_TASK}"]
    assert hung.attempt_count == 2
    first, second = await store.query_attempts(hung.rollout_id)
    assert first.status == AttemptStatus.FAILED and first.error is not None and first.error.retryable is True
    assert "ran longer than 3.0 s" in first.error.message
    assert second.status == AttemptStatus.SUCCEEDED
    assert not [s for s in spans[hung.rollout_id] if s.attempt_id == first.attempt_id and s.name == "agentbolt.reward"]
    assert [rollouts[r].attempt_count for r in rollouts if r != hung.rollout_id] == [1] * (N_TASKS - 1)

    # at most 4 programs at once, and they did run side by side
    intervals = [tuple(json.loads(p.read_text())) for p in logs.glob("*.span")]
    assert len(intervals) == N_TASKS
    assert 2 <= _max_overlap(intervals) <= CONCURRENCY  # type: ignore[arg-type]
    assert time.monotonic() - started < 60
