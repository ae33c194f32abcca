"""DSPy 3.4 on both paths. DSPy sends its requests through an HTTP transport of its own
(``dspy.LM``'s default engine), which no client instrumentor sees; with
``openinference-instrumentation-dspy`` installed agentbolt's tracer switches it on, and
each ``dspy.LM`` call is recorded from DSPy's own span: its messages and answer.

* **Tracer path** (the program calls the model server directly): one recorded call per LM
  call, with the messages DSPy sent — trainable by re-tokenising; no token ids (DSPy's span
  does not carry the server's answer as it came).
* **Gateway path** (``api_base=llm.endpoint``): DSPy's span and the gateway's are one call,
  with the engine's token ids.

The fake server echoes the last user message; the question carries DSPy's answer markers,
so the echo parses as ``answer: 5``. ``cache=False``: DSPy's cache ignores the base URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fakes.openai_server import MODEL, FakeOpenAI, serve_fake_openai

pytest.importorskip("dspy", reason="pip install dspy")
pytest.importorskip("openinference.instrumentation.dspy", reason="pip install openinference-instrumentation-dspy")

import agentbolt
from agentbolt.adapters import SampleAdapter, extract_model_calls
from agentbolt.algorithms.evaluate import Evaluate
from agentbolt.engines import EngineSpec
from agentbolt.gateway import GatewayConfig, GatewaySpec
from agentbolt.runner import gateway_llm
from agentbolt.semconv import GATEWAY_SCOPE
from agentbolt.store.memory import MemoryStore
from agentbolt.trainer import Trainer
from agentbolt.types import LLM, Span

QUESTION = "What is 2 + 3?"
TASKS = [{"id": f"t{i}", "question": f"{QUESTION} ({i})\n\n[[ ## answer ## ]]\n5\n\n[[ ## completed ## ]]"}
         for i in range(2)]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as url:
        yield url


@agentbolt.rollout
async def predict(task: dict[str, Any], llm: LLM) -> float:
    """Two ``dspy.Predict`` calls, the second on the first one's answer."""
    import dspy

    lm = dspy.LM("openai/" + llm.model, api_base=llm.endpoint, api_key=llm.api_key or "none", cache=False)
    with dspy.context(lm=lm):
        first = await dspy.Predict("question -> answer").acall(question=task["question"])
        again = await dspy.Predict("question -> answer").acall(question=f"Check {first.answer}.\n{task['question']}")
    return 1.0 if first.answer == again.answer == "5" else 0.0


async def run(resource: LLM, gateway: GatewaySpec | None = None) -> list[list[Span]]:
    store = MemoryStore()
    trainer = Trainer(algorithm=Evaluate(show=False), store=store, gateway=gateway, resources={"llm": resource})
    result = await trainer.fit_async(predict, TASKS)
    assert [r.reward for r in result.rows] == [1.0] * len(TASKS), [r.error for r in result.rows]
    return [await store.get_spans(row.rollout_id, "latest") for row in result.rows]


async def test_the_tracer_records_each_dspy_lm_call_with_its_messages(server: FakeOpenAI) -> None:
    sent = len(server.requests)
    rollouts = await run(LLM(endpoint=server, model=MODEL))
    assert len(server.requests) - sent == 2 * len(TASKS)  # cache=False: every call reached the server
    for task, spans in zip(TASKS, rollouts, strict=True):
        calls = extract_model_calls(spans)
        assert len(calls) == 2
        for call in calls:
            assert call.token_ids_source == "none" and call.messages is not None
            assert [m["role"] for m in call.messages] == ["system", "user"]
            assert call.response_text is not None and "[[ ## answer ## ]]\n5" in call.response_text
            request = json.loads(call.attributes["agentbolt.llm.request"])
            assert request["model"] == MODEL and not {"api_key", "api_base", "temperature"} & request.keys()
        assert task["question"] in calls[0].messages[1]["content"]
        assert calls[1].messages[1]["content"].startswith("[[ ## question ## ]]\nCheck 5.")


async def test_through_the_gateway_each_dspy_call_is_one_call_with_token_ids(server: FakeOpenAI) -> None:
    gateway = GatewaySpec(engine=EngineSpec(kind="vllm", url=server), config=GatewayConfig(span_flush_interval=0.01))
    for spans in await run(gateway_llm(), gateway):
        dspy_spans = [s for s in spans if s.attributes.get("llm.provider") == "openai"]
        assert len(dspy_spans) == 2  # DSPy's own record of each call, beside the gateway's
        calls = extract_model_calls(spans)
        assert len(calls) == 2  # the two records of a call are one call
        assert all(c.attributes.get("otel.scope.name") == GATEWAY_SCOPE and c.has_token_ids for c in calls)
        assert [len(f.samples) for f in SampleAdapter().adapt(spans)] == [2]  # DSPy rebuilds each prompt
