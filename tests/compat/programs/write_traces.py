"""Port of v0.3's ``examples/minimal/write_traces.py`` (``otel`` mode): record spans of an
attempt by hand with a tracer's ``trace_context``, to an in-memory store or through a
store client. Imports changed from ``agentlightning`` to ``agentbolt.compat``."""

from __future__ import annotations

import asyncio

from agentbolt.compat import LightningStoreClient, OtelTracer, Span, emit_reward
from agentbolt.compat.store import InMemoryLightningStore


async def send_traces_via_otel(server_url: str | None = None) -> list[Span]:
    tracer = OtelTracer()
    store = InMemoryLightningStore() if server_url is None else LightningStoreClient(server_url)
    rollout = await store.start_rollout(input={"origin": "write_traces_example"})
    with tracer.lifespan(store):
        async with tracer.trace_context(
            "trace-manual", store=store, rollout_id=rollout.rollout_id, attempt_id=rollout.attempt.attempt_id
        ) as otel_tracer:
            with otel_tracer.start_as_current_span("grpc-span-1"):
                await asyncio.sleep(0.01)
                with otel_tracer.start_as_current_span("grpc-span-2"):
                    await asyncio.sleep(0.01)
            with otel_tracer.start_as_current_span("grpc-span-3"):
                await asyncio.sleep(0.01)
            emit_reward(1.0)
    traces = list(await store.query_spans(rollout_id=rollout.rollout_id))
    if isinstance(store, LightningStoreClient):
        await store.close()
    return traces
