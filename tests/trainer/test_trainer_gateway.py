"""``Trainer(gateway=...)``: an unmodified program (a ``Harness``) trained with no server
of the user's own — the trainer serves the model gateway next to the store.

* multi-process: the gateway spec goes to the server process the trainer starts, which
  builds the engine there; runner processes run the program, which calls its rollout's
  gateway URL; every rollout is scored and its model call recorded with token ids;
* in-process: store + gateway served from a thread of the trainer, same outcome, and
  the program needs no ``server_url``;
* what cannot work says so before anything starts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner.harness.helpers import PY, script
from fakes.openai_server import FakeOpenAI, serve_fake_openai

from agentbolt.algorithms.evaluate import Evaluate, EvaluationResult
from agentbolt.runner.harness import Harness
from agentbolt.execution import MultiProcessStrategy
from agentbolt.engines import EngineSpec, OpenAIEngine
from agentbolt.gateway import Gateway, GatewayConfig, GatewaySpec
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.trainer import Trainer
from agentbolt.types import RolloutStatus, Span

# stdlib only: the program knows nothing about agentbolt
PROGRAM = """
import json, os, urllib.request
task = json.loads(os.environ["AGENTBOLT_TASK"])
body = json.dumps({"model": "whatever", "temperature": 0.3,
                   "messages": [{"role": "user", "content": "add " + task["q"]}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body, method="POST",
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=30) as resp:
    print(json.load(resp)["choices"][0]["message"]["content"])
"""

# the fake model echoes; the grade is the task's weight when the echo is right
GRADER = """
import json, os, sys
task = json.loads(os.environ["AGENTBOLT_TASK"])
print(task["w"] if sys.stdin.read().strip() == "echo: add " + task["q"] else 0.0)
"""

TASKS = [{"q": f"{i} {i}", "w": (i + 1) / 10} for i in range(8)]


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as url:
        yield url


def harness(tmp_path: Path) -> Harness:
    return Harness(
        [PY, script(tmp_path, "agent.py", PROGRAM)], evaluator=[PY, script(tmp_path, "grade.py", GRADER)], timeout=30
    )


def spec_for(url: str) -> GatewaySpec:
    # the fake answers in vLLM's format (token ids), so it stands in for vLLM here
    return GatewaySpec(
        engine=EngineSpec(kind="vllm", url=url),
        config=GatewayConfig(sampling={"val": {"temperature": 0.0}}, span_flush_interval=0.01),
    )


def model_calls(spans: list[Span]) -> list[Span]:
    return [s for s in spans if "agentbolt.llm.request" in s.attributes]


def assert_all_scored(result: EvaluationResult) -> None:
    assert [r.status for r in result.rows] == [RolloutStatus.SUCCEEDED] * len(TASKS), [r.error for r in result.rows]
    assert [r.reward for r in result.rows] == [t["w"] for t in TASKS]


async def assert_one_recorded_call_each(store: SqliteStore | MemoryStore, result: EvaluationResult) -> None:
    for row in result.rows:
        calls: list[Span] = []
        for _ in range(100):  # the gateway writes spans in the background
            calls = model_calls(await store.get_spans(row.rollout_id, "latest"))
            if calls:
                break
            await asyncio.sleep(0.05)
        assert len(calls) == 1, row
        attrs = calls[0].attributes
        assert attrs["agentbolt.llm.token_ids_source"] == "engine"
        assert attrs["agentbolt.llm.response_token_ids"]
        assert '"temperature":0.0' in attrs["agentbolt.llm.request"].replace(" ", "")  # forced for val rollouts


@pytest.mark.timeout(90)
def test_multiprocess_fit_of_a_harness_with_the_gateway_in_the_server_process(
    fake_llm: FakeOpenAI, tmp_path: Path
) -> None:
    trainer = Trainer(
        algorithm=Evaluate(show=False),
        n_runners=2,
        strategy=MultiProcessStrategy(run_dir=tmp_path / "run"),
        gateway=spec_for(fake_llm),
    )
    result = trainer.fit(harness(tmp_path), TASKS)
    assert_all_scored(result)
    assert len(fake_llm.bodies("/v1/chat/completions")) == len(TASKS)
    assert {b["temperature"] for b in fake_llm.bodies("/v1/chat/completions")} == {0.0}  # the program asked 0.3

    async def check() -> None:
        async with SqliteStore(tmp_path / "run" / "store.db") as store:
            await assert_one_recorded_call_each(store, result)

    asyncio.run(check())


@pytest.mark.timeout(60)
async def test_inprocess_fit_of_a_harness_serves_store_and_gateway_itself(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    store = MemoryStore()
    trainer = Trainer(
        algorithm=Evaluate(show=False), store=store, gateway=spec_for(fake_llm)
    )
    result = await trainer.fit_async(harness(tmp_path), TASKS)  # no Harness(server_url=...) needed
    assert_all_scored(result)
    await assert_one_recorded_call_each(store, result)


async def test_an_engine_spec_alone_is_a_gateway_with_default_settings(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    store = MemoryStore()
    trainer = Trainer(
        algorithm=Evaluate(show=False),
        store=store,
        gateway=EngineSpec(kind="openai", url=fake_llm),
    )
    result = await trainer.fit_async(harness(tmp_path), TASKS[:2])
    assert [r.reward for r in result.rows] == [t["w"] for t in TASKS[:2]]
    # an OpenAI-compatible provider: token ids are not asked for; the span names the engine
    assert all("return_token_ids" not in b for b in fake_llm.bodies("/v1/chat/completions"))
    calls: list[Span] = []
    for _ in range(100):
        calls = model_calls(await store.get_spans(result.rows[0].rollout_id, "latest"))
        if calls:
            break
        await asyncio.sleep(0.05)
    assert calls[0].attributes["agentbolt.llm.engine"] == "openai"


async def test_a_gateway_object_cannot_go_to_a_server_process(fake_llm: FakeOpenAI, tmp_path: Path) -> None:
    trainer = Trainer(
        strategy=MultiProcessStrategy(run_dir=tmp_path / "run"), gateway=Gateway(OpenAIEngine(fake_llm))
    )
    with pytest.raises(TypeError, match="GatewaySpec"):
        await trainer.fit_async(harness(tmp_path), TASKS[:1])


@pytest.mark.parametrize("strategy", ["inprocess", "multiprocess", "external"])
async def test_a_gateway_cannot_be_added_to_a_server_the_trainer_does_not_start(
    fake_llm: FakeOpenAI, tmp_path: Path, strategy: str
) -> None:
    trainer = Trainer(store="http://127.0.0.1:9", strategy=strategy, gateway=spec_for(fake_llm))
    with pytest.raises(ValueError, match="agentbolt server --engine"):
        await trainer.fit_async(harness(tmp_path), TASKS[:1])


def test_a_gateway_must_be_described() -> None:
    with pytest.raises(TypeError, match="EngineSpec"):
        Trainer(gateway="http://127.0.0.1:8000/v1")  # type: ignore[arg-type]
