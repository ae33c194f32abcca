"""Many rollouts at once in ONE process never mix spans: asyncio tasks, threads from
``asyncio.to_thread`` and threads started with a copied context."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading

import openai
import pytest
from fakes.openai_server import FakeOpenAI, render_chat, token_logprob, tokenize

from agentbolt import semconv
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import Tracer, agent, emit_reward
from agentbolt.types import Claim

from .recording import claim, model_calls, named, stored_spans

N_ROLLOUTS = 32
CALLS_PER_ROLLOUT = 3


def question(rollout: int, step: int) -> str:
    return f"rollout {rollout} step {step}"


async def check_rollout(store: MemoryStore, c: Claim, i: int, *, logprobs: bool) -> None:
    """Every model call of rollout ``i`` is its own, with the server's token ids, and
    nothing else is there."""
    spans = await stored_spans(store, c)
    calls = sorted(model_calls(spans), key=lambda s: s.start_time)
    assert len(calls) == CALLS_PER_ROLLOUT, f"rollout {i} has {len(calls)} model calls"
    for step, span in enumerate(calls):
        said = question(i, step)
        a = span.attributes
        assert a[semconv.ROLLOUT_ID] == c.rollout.rollout_id
        assert a[semconv.ATTEMPT_ID] == c.attempt.attempt_id
        assert json.loads(a["agentbolt.llm.request"])["messages"] == [{"role": "user", "content": said}]
        assert json.loads(a["agentbolt.llm.response"])["choices"][0]["message"]["content"] == f"echo: {said}"
        assert a["gen_ai.request.model"] == "fake-model"
        assert a["agentbolt.llm.prompt_token_ids"] == tokenize(render_chat([{"role": "user", "content": said}]))
        answer = tokenize(f"echo: {said}")
        assert a["agentbolt.llm.response_token_ids"] == answer
        if logprobs:
            assert a["agentbolt.llm.response_logprobs"] == [token_logprob(t, k) for k, t in enumerate(answer)]
    (reward,) = named(spans, semconv.REWARD_SPAN)
    assert reward.attributes[semconv.REWARD_VALUE] == float(i)
    (root,) = named(spans, "agentbolt.rollout")
    assert all(s.trace_id == root.trace_id for s in spans)
    assert (await store.get_rollout(c.rollout.rollout_id)).reward == float(i)


async def test_32_concurrent_async_rollouts_keep_their_own_model_calls(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")
    claims = [await claim(store, {"i": i}) for i in range(N_ROLLOUTS)]

    async def rollout(i: int, c: Claim) -> None:
        with tracer.attempt(c.rollout, c.attempt):
            for step in range(CALLS_PER_ROLLOUT):
                await client.chat.completions.create(
                    model="fake-model", messages=[{"role": "user", "content": question(i, step)}], logprobs=True
                )
                await asyncio.sleep(0)  # let the other rollouts interleave
            emit_reward(float(i))

    await asyncio.gather(*(rollout(i, c) for i, c in enumerate(claims)))
    await tracer.flush()
    for i, c in enumerate(claims):
        await check_rollout(store, c, i, logprobs=True)
    # the server saw exactly the calls the spans describe
    sent = sorted(
        b["messages"][0]["content"]
        for b in fake_openai.bodies("/v1/chat/completions")
        if b["messages"][0]["content"].startswith("rollout ") and b.get("logprobs")
    )
    assert sent == sorted(question(i, step) for i in range(N_ROLLOUTS) for step in range(CALLS_PER_ROLLOUT))


async def test_sync_clients_in_worker_threads_keep_their_own_model_calls(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.OpenAI(base_url=fake_openai, api_key="test")
    claims = [await claim(store) for _ in range(8)]

    def agent_body(i: int) -> None:
        for step in range(CALLS_PER_ROLLOUT):
            client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": question(i, step)}]
            )
        emit_reward(float(i))

    async def rollout(i: int, c: Claim) -> None:
        with tracer.attempt(c.rollout, c.attempt):
            await asyncio.to_thread(agent_body, i)

    await asyncio.gather(*(rollout(i, c) for i, c in enumerate(claims)))
    for c in claims:
        await tracer.flush(c.attempt.attempt_id)
    for i, c in enumerate(claims):
        await check_rollout(store, c, i, logprobs=False)


async def test_a_thread_started_with_a_copied_context_records_into_the_rollout(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.OpenAI(base_url=fake_openai, api_key="test")
    c = await claim(store)

    def agent_body() -> None:
        for step in range(CALLS_PER_ROLLOUT):
            client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": question(0, step)}]
            )
        emit_reward(0.0)

    with tracer.attempt(c.rollout, c.attempt):
        thread = threading.Thread(target=contextvars.copy_context().run, args=(agent_body,))
        thread.start()
        await asyncio.to_thread(thread.join)
    await tracer.flush(c.attempt.attempt_id)
    await check_rollout(store, c, 0, logprobs=False)


async def test_calls_outside_any_rollout_are_not_recorded(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")
    await client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "nobody's"}])
    await tracer.flush()
    assert (await store.stats()).total_spans == 0


async def test_agent_names_split_the_calls_of_a_two_agent_rollout(
    store: MemoryStore, tracer: Tracer, fake_openai: FakeOpenAI
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai, api_key="test")
    c = await claim(store)

    async def ask(text: str) -> str:
        r = await client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": text}])
        return r.choices[0].message.content or ""

    with tracer.attempt(c.rollout, c.attempt):
        with agent("planner"):
            plan = await ask("make a plan")
        with agent("solver"):
            await ask(f"solve with {plan}")
            await ask("check the answer")
    await tracer.flush(c.attempt.attempt_id)
    calls = model_calls(await stored_spans(store, c))
    by_agent = sorted((s.attributes.get("agentbolt.agent.name"), s.start_time) for s in calls)
    assert [name for name, _ in by_agent] == ["planner", "solver", "solver"]


async def test_global_opentelemetry_spans_are_recorded_unless_switched_off(
    tracer: Tracer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A started tracer makes the global provider agentbolt's (none was set), so spans of
    the global OpenTelemetry API inside an attempt are recorded (tests/compat has the
    end-to-end check); ``AGENTBOLT_GLOBAL_OTEL=0`` leaves the global provider alone."""
    from opentelemetry import trace

    from agentbolt.tracing.global_otel import ENV_SWITCH, record_global_spans
    from agentbolt.tracing.processor import shared_provider

    assert trace.get_tracer_provider() is shared_provider()
    monkeypatch.setenv(ENV_SWITCH, "0")
    assert record_global_spans() is False


def test_auto_instrumentation_covers_the_installed_libraries(tracer: Tracer) -> None:
    import openai  # noqa: F401 — imported, so its instrumentation is on

    from agentbolt.tracing import instrument, instrumented_libraries

    assert {"openai", "langchain_core"} <= set(instrument())
    assert "openai" in instrumented_libraries()
    with pytest.raises(ValueError, match="cannot instrument"):
        instrument(["requests"])
