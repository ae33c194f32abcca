"""The store methods v0.3 programs call, on agentbolt's stores (``LightningStore``), and
v0.3's Trainer arguments."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentbolt as agl
from agentbolt.execution import InProcessStrategy, MultiProcessStrategy


async def test_queue_attempts_and_statuses_the_v03_way() -> None:
    store = agl.InMemoryLightningStore()
    update = await store.add_resources({"prompt": agl.PromptTemplate(template="Q: {q}")})
    assert update.resources_id == "rs-1" and (await store.get_latest_resources()).resources_id == "rs-1"
    first = await store.enqueue_rollout(input={"q": 1}, mode="val", resources_id=update.resources_id,
                                        metadata={"k": "v"})
    assert first.status == "queuing" and first.mode == "val" and first.resources_version == 1
    more = await store.enqueue_many_rollouts([agl.EnqueueRolloutRequest(input={"q": 2}), {"input": {"q": 3}}])
    assert [r.input for r in more] == [{"q": 2}, {"q": 3}]
    assert [r.rollout_id for r in await store.query_rollouts(status_in=["queuing"])] == [
        first.rollout_id, *(r.rollout_id for r in more)]

    claimed = await store.dequeue_rollout(worker_id="w1")
    assert isinstance(claimed, agl.AttemptedRollout) and claimed.rollout_id == first.rollout_id
    assert claimed.attempt.sequence_id == 1 and claimed.status == "preparing"
    assert (await store.get_latest_attempt(first.rollout_id)).attempt_id == claimed.attempt.attempt_id
    await store.update_attempt(first.rollout_id, "latest", status="running", last_heartbeat_time=1.0)
    await store.update_attempt(first.rollout_id, claimed.attempt.attempt_id, status="succeeded")
    done = await store.wait_for_rollouts(rollout_ids=[first.rollout_id], timeout=1)
    assert [r.status for r in done] == ["succeeded"]
    rows = await store.query_rollouts(rollout_ids=[first.rollout_id])
    assert isinstance(rows[0], agl.AttemptedRollout)  # v0.3 attaches the attempt once there is one
    assert await store.get_rollout_by_id("ro-unknown") is None
    assert [r.input for r in await store.query_rollouts(status_in=["queuing"], sort_by="rollout_id",
                                                        limit=1, offset=0)] != []
    assert len(await store.dequeue_many_rollouts(limit=5, worker_id="w1")) == 2
    assert await store.dequeue_rollout() is None
    stats = await store.statistics()
    assert stats["total_rollouts"] == 3 and stats["queue_depth"] == 0
    assert [w.worker_id for w in await store.query_workers(worker_id_contains="w")] == ["w1"]


async def test_add_otel_span_with_a_v03_reward_counts_as_the_reward() -> None:
    store = agl.InMemoryLightningStore()
    started = await store.start_rollout(input="x")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("v03").start_as_current_span("agentlightning.annotation") as span:
        span.set_attribute("agentlightning.reward.0.name", "primary")
        span.set_attribute("agentlightning.reward.0.value", 0.75)
    stored = await store.add_otel_span(started.rollout_id, started.attempt.attempt_id, exporter.get_finished_spans()[0])
    assert stored.name == "agentlightning.annotation"
    assert agl.find_final_reward(await store.query_spans(started.rollout_id)) == 0.75
    assert (await store.get_latest_attempt(started.rollout_id)).reward == 0.75
    assert await store.get_next_span_sequence_id(started.rollout_id, started.attempt.attempt_id) == 1  # agentbolt numbers from 0


async def test_what_agentbolt_does_not_do_is_refused_with_what_to_do_instead() -> None:
    store = agl.InMemoryLightningStore()
    rollout = await store.enqueue_rollout(input=1)
    with pytest.raises(NotImplementedError, match="empty queue"):
        await store.start_rollout(input=2)
    with pytest.raises(NotImplementedError, match="retry_on"):
        await store.start_attempt(rollout.rollout_id)
    with pytest.raises(NotImplementedError, match="cancel it"):
        await store.update_rollout(rollout.rollout_id, input=3)
    cancelled = await store.update_rollout(rollout.rollout_id, status="cancelled")
    assert cancelled.status == "cancelled"
    again = await store.update_resources("default", {"p": "plain text prompt {x}"})
    assert again.resources["p"] == agl.PromptTemplate(template="plain text prompt {x}")


def test_v03_trainer_arguments_map_onto_agentbolts() -> None:
    store = agl.InMemoryLightningStore()
    prompt = agl.PromptTemplate(template="{q}")
    trainer = agl.Trainer(n_workers=3, strategy="shm", store=store, initial_resources={"main_prompt": prompt},
                          adapter=agl.TraceToMessages(), tracer=agl.AgentOpsTracer(), max_rollouts=5)
    assert trainer.n_runners == 3 and isinstance(trainer.strategy, InProcessStrategy)
    assert trainer.store is store.store and trainer.resources == {"main_prompt": prompt}
    assert isinstance(agl.Trainer(strategy="cs").strategy, MultiProcessStrategy)
    assert isinstance(agl.Trainer(strategy=agl.ClientServerExecutionStrategy()).strategy, MultiProcessStrategy)
    with pytest.raises(TypeError, match="not both"):
        agl.Trainer(resources={"a": prompt}, initial_resources={"b": prompt})
    with pytest.raises(TypeError, match="unexpected arguments n_wrokers"):
        agl.Trainer(n_wrokers=2)


async def test_v03s_unset_means_not_given() -> None:
    from agentbolt.compat.store.base import UNSET, Unset

    store = agl.InMemoryLightningStore()
    started = await store.start_rollout(input={"q": 1})
    attempt = await store.update_attempt(started.rollout_id, started.attempt.attempt_id, status=UNSET,
                                         metadata={"note": "x"}, worker_id=UNSET)
    assert attempt.metadata["note"] == "x" and isinstance(UNSET, Unset) and not UNSET
    rollout = await store.update_rollout(started.rollout_id, input=UNSET, status=UNSET, metadata={"tag": "t"})
    assert rollout.metadata["tag"] == "t" and rollout.input == {"q": 1}
