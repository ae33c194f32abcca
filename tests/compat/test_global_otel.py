"""Spans made through the global OpenTelemetry API inside a rollout are recorded as
spans of its attempt; outside any rollout nothing is recorded."""

from __future__ import annotations

from opentelemetry import trace

import agentbolt as agl

otel = trace.get_tracer("my.app")  # taken before agentbolt starts: the global proxy


@agl.rollout
def agent(task: str) -> float:
    with otel.start_as_current_span("plan") as span:
        span.set_attribute("app.task", task)
        with trace.get_tracer("my.app.inner").start_as_current_span("step"):
            pass
    return 1.0


def test_global_api_spans_in_a_rollout_are_recorded() -> None:
    store = agl.MemoryStore()
    result = agl.Trainer(store=store).fit(agent, ["t"])
    spans = result.rows[0]
    import asyncio

    recorded = asyncio.run(store.get_spans(spans.rollout_id))
    by_name = {s.name: s for s in recorded}
    assert by_name["plan"].attributes["app.task"] == "t"
    assert by_name["step"].parent_id == by_name["plan"].span_id
    assert by_name["plan"].parent_id == by_name["agentbolt.rollout"].span_id


def test_global_api_spans_outside_a_rollout_are_not_recorded() -> None:
    with otel.start_as_current_span("outside") as span:
        assert not span.is_recording()
