"""Emitters write the spans documented in docs/semantic-conventions.md."""

from __future__ import annotations

import asyncio
import json

import pytest

import agentbolt.tracing as tr
from agentbolt import semconv
from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import NoActiveRolloutError, Tracer
from agentbolt.types import SpanStatus

from .recording import claim, named, stored_spans


async def record(store: MemoryStore, tracer: Tracer, body) -> list:  # type: ignore[no-untyped-def]
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        result = body()
        if asyncio.iscoroutine(result):
            await result
    await tracer.flush(c.attempt.attempt_id)
    return await stored_spans(store, c)


# ----------------------------------------------------------------------------- rewards
async def test_a_plain_number_is_the_primary_reward_named_reward(store: MemoryStore, tracer: Tracer) -> None:
    spans = await record(store, tracer, lambda: tr.emit_reward(0.8))
    (reward,) = named(spans, semconv.REWARD_SPAN)
    assert reward.attributes[semconv.REWARD_VALUE] == 0.8
    assert reward.attributes[semconv.REWARD_PRIMARY] == "reward"
    assert reward.attributes["agentbolt.rewards.reward"] == 0.8


async def test_named_rewards_keep_every_value_and_the_chosen_primary(store: MemoryStore, tracer: Tracer) -> None:
    spans = await record(store, tracer, lambda: tr.emit_reward({"acc": 1, "fmt": 0.5}, primary="acc"))
    (reward,) = named(spans, semconv.REWARD_SPAN)
    assert reward.attributes["agentbolt.rewards.acc"] == 1.0
    assert reward.attributes["agentbolt.rewards.fmt"] == 0.5
    assert reward.attributes[semconv.REWARD_PRIMARY] == "acc"
    assert reward.attributes[semconv.REWARD_VALUE] == 1.0


async def test_a_single_keyword_reward_is_the_primary_one(store: MemoryStore, tracer: Tracer) -> None:
    spans = await record(store, tracer, lambda: tr.emit_reward(score=0.85))
    (reward,) = named(spans, semconv.REWARD_SPAN)
    assert reward.attributes[semconv.REWARD_PRIMARY] == "score"
    assert reward.attributes[semconv.REWARD_VALUE] == 0.85


async def test_a_number_with_keyword_rewards_stays_primary(store: MemoryStore, tracer: Tracer) -> None:
    spans = await record(store, tracer, lambda: tr.emit_reward(0.3, fmt=1.0))
    (reward,) = named(spans, semconv.REWARD_SPAN)
    assert reward.attributes[semconv.REWARD_PRIMARY] == "reward"
    assert reward.attributes[semconv.REWARD_VALUE] == 0.3
    assert reward.attributes["agentbolt.rewards.fmt"] == 1.0


async def test_options_are_never_rewards(store: MemoryStore, tracer: Tracer) -> None:
    """Agent Lightning's keyword options (propagate, attributes, primary_key) are options:
    ``emit_reward(0.5, propagate=True)`` records one reward, not a second one named
    ``propagate``."""

    def body() -> None:
        tr.emit_reward(0.5, propagate=True, attributes={"tag": "fast"})
        tr.emit_reward({"acc": 1.0, "fmt": 0.0}, primary_key="acc")

    spans = await record(store, tracer, body)
    first, second = named(spans, semconv.REWARD_SPAN)
    assert {k: v for k, v in first.attributes.items() if k.startswith(semconv.REWARD_PREFIX)} == {
        "agentbolt.rewards.reward": 0.5
    }
    assert first.attributes["tag"] == "fast"
    assert second.attributes[semconv.REWARD_PRIMARY] == "acc"


async def test_propagate_false_builds_one_reward_without_recording_it(store: MemoryStore, tracer: Tracer) -> None:
    built = []
    spans = await record(store, tracer, lambda: built.append(tr.emit_reward(0.5, propagate=False)))
    assert named(spans, semconv.REWARD_SPAN) == []  # as in Agent Lightning: not sent to the trace
    (span,) = built
    rewards = {k: v for k, v in span.attributes.items() if k.startswith(semconv.REWARD_PREFIX)}
    assert rewards == {"agentbolt.rewards.reward": 0.5}
    assert semconv.primary_reward(span.name, span.attributes) == 0.5


@pytest.mark.parametrize("call", [
    lambda: tr.emit_reward({"propagate": 1.0}),
    lambda: tr.emit_reward(acc=1.0, attributes=0.5),  # type: ignore[arg-type]
    lambda: tr.emit_reward(0.5, propagate=0),  # type: ignore[arg-type]
])
async def test_a_reward_named_like_an_option_is_refused(store: MemoryStore, tracer: Tracer, call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((ValueError, TypeError), match="option"):
        await record(store, tracer, call)


async def test_the_output_span_holds_the_answer(store: MemoryStore, tracer: Tracer) -> None:
    spans = await record(store, tracer, lambda: tr.emit_output({"answer": "Paris"}))
    (out,) = named(spans, semconv.OUTPUT_SPAN)
    assert out.attributes[semconv.OUTPUT_TYPE] == "dict"
    assert semconv.output_of(spans) == (True, {"answer": "Paris"})


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "says"),
    [
        (({"a": 1.0, "b": 2.0},), {}, ValueError, "primary="),
        ((), {}, ValueError, "needs a value"),
        ((float("nan"),), {}, ValueError, "finite"),
        (("high",), {}, TypeError, "must be a number"),
        (({"a": 1.0},), {"primary": "b"}, ValueError, "not among the rewards"),
    ],
)
async def test_unclear_rewards_are_refused_with_a_hint(
    store: MemoryStore, tracer: Tracer, args: tuple, kwargs: dict, error: type, says: str
) -> None:
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        with pytest.raises(error, match=says):
            tr.emit_reward(*args, **kwargs)


async def test_intermediate_rewards_keep_their_place_in_time_and_the_last_primary_counts(
    store: MemoryStore, tracer: Tracer
) -> None:
    async def body() -> None:
        with tr.operation("step-1"):
            pass
        tr.emit_reward(0.2, primary="progress")
        with tr.operation("step-2"):
            pass
        tr.emit_reward({"progress": 0.6, "final": 1.0}, primary="final")

    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt):
        await body()
    await tracer.flush(c.attempt.attempt_id)
    spans = await stored_spans(store, c)
    timeline = [s for s in sorted(spans, key=lambda s: s.start_time) if s.name != "agentbolt.rollout"]
    labels = [
        s.attributes.get("agentbolt.operation.name") or s.attributes.get(semconv.REWARD_PRIMARY) for s in timeline
    ]
    assert labels == ["step-1", "progress", "step-2", "final"]
    rewards = named(spans, semconv.REWARD_SPAN)
    assert [r.sequence_id for r in rewards] == sorted(r.sequence_id for r in rewards)
    assert (await store.get_rollout(c.rollout.rollout_id)).reward == 1.0


async def test_emitters_outside_a_rollout_say_where_they_must_run() -> None:
    with pytest.raises(NoActiveRolloutError, match="inside an agent run by agentbolt"):
        tr.emit_reward(1.0)
    with pytest.raises(NoActiveRolloutError):
        tr.emit_message("hello")


# ----------------------------------------------------------------------------- others
async def test_message_object_annotation_spans(store: MemoryStore, tracer: Tracer) -> None:
    def body() -> None:
        tr.emit_message("I will look it up", role="assistant")
        tr.emit_object({"plan": ["search", "answer"], "n": 2}, name="plan")
        tr.emit_annotation(difficulty="hard", turns=3, tags=["a", "b"], extra={"k": 1})

    spans = await record(store, tracer, body)
    (msg,) = named(spans, "agentbolt.message")
    assert msg.attributes["agentbolt.message.role"] == "assistant"
    assert msg.attributes["agentbolt.message.content"] == "I will look it up"
    (obj,) = named(spans, "agentbolt.object")
    assert obj.attributes["agentbolt.object.name"] == "plan"
    assert obj.attributes["agentbolt.object.type"] == "dict"
    assert json.loads(obj.attributes["agentbolt.object.json"]) == {"plan": ["search", "answer"], "n": 2}
    (note,) = named(spans, "agentbolt.annotation")
    assert note.attributes["agentbolt.annotation.difficulty"] == "hard"
    assert note.attributes["agentbolt.annotation.turns"] == 3
    assert note.attributes["agentbolt.annotation.tags"] == ["a", "b"]
    assert json.loads(note.attributes["agentbolt.annotation.extra"]) == {"k": 1}


async def test_objects_that_are_not_json_become_json_anyway(store: MemoryStore, tracer: Tracer) -> None:
    from agentbolt.types import LLM

    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    def body() -> None:
        tr.emit_object(LLM(endpoint="http://x/v1", model="m"), name="llm")
        tr.emit_object(Opaque(), name="opaque")

    spans = await record(store, tracer, body)
    by_name = {s.attributes["agentbolt.object.name"]: s for s in named(spans, "agentbolt.object")}
    assert json.loads(by_name["llm"].attributes["agentbolt.object.json"])["model"] == "m"
    assert by_name["llm"].attributes["agentbolt.object.type"] == "agentbolt.types.LLM"
    assert json.loads(by_name["opaque"].attributes["agentbolt.object.json"]) == "<opaque>"


async def test_exception_span_has_type_message_traceback_and_an_otel_event(store: MemoryStore, tracer: Tracer) -> None:
    def failing() -> None:
        raise KeyError("missing-key")

    def body() -> None:
        try:
            failing()
        except KeyError as exc:
            tr.emit_exception(exc)

    spans = await record(store, tracer, body)
    (exc,) = named(spans, "agentbolt.exception")
    assert exc.status == SpanStatus.ERROR
    assert exc.attributes["exception.type"] == "KeyError"
    assert exc.attributes["exception.message"] == "'missing-key'"
    assert "in failing" in exc.attributes["exception.stacktrace"]
    (event,) = [e for e in exc.events if e.name == "exception"]
    assert event.attributes["exception.type"] == "KeyError"
    assert "in failing" in event.attributes["exception.stacktrace"]


async def test_an_exception_leaving_the_attempt_marks_the_root_span(store: MemoryStore, tracer: Tracer) -> None:
    c = await claim(store)
    with pytest.raises(RuntimeError):
        with tracer.attempt(c.rollout, c.attempt):
            raise RuntimeError("agent broke")
    await tracer.flush(c.attempt.attempt_id)
    (root,) = named(await stored_spans(store, c), "agentbolt.rollout")
    assert root.status == SpanStatus.ERROR
    assert root.status_message == "RuntimeError: agent broke"
    assert [e.name for e in root.events] == ["exception"]


# ----------------------------------------------------------------------------- operation
@tr.operation
def add(x: int, y: int = 10) -> int:
    return x + y


@tr.operation(name="fetch")
async def fetch(url: str) -> dict:
    await asyncio.sleep(0)
    return {"url": url, "ok": True}


async def test_operation_records_inputs_and_outputs_of_sync_and_async_functions(
    store: MemoryStore, tracer: Tracer
) -> None:
    async def body() -> None:
        assert add(1) == 11
        assert await fetch("http://example.test") == {"url": "http://example.test", "ok": True}
        with tr.operation("block") as op:
            op.set_input(question="2+2")
            op.set_output(4)

    spans = await record(store, tracer, body)
    ops = {s.attributes["agentbolt.operation.name"]: s for s in named(spans, "agentbolt.operation")}
    assert set(ops) == {"add", "fetch", "block"}
    assert json.loads(ops["add"].attributes["agentbolt.operation.input"]) == {"x": 1, "y": 10}
    assert json.loads(ops["add"].attributes["agentbolt.operation.output"]) == 11
    assert json.loads(ops["fetch"].attributes["agentbolt.operation.input"]) == {"url": "http://example.test"}
    assert json.loads(ops["fetch"].attributes["agentbolt.operation.output"]) == {
        "url": "http://example.test",
        "ok": True,
    }
    assert json.loads(ops["block"].attributes["agentbolt.operation.input"]) == {"question": "2+2"}
    assert json.loads(ops["block"].attributes["agentbolt.operation.output"]) == 4


async def test_spans_inside_an_operation_are_its_children(store: MemoryStore, tracer: Tracer) -> None:
    def body() -> None:
        with tr.operation("outer"):
            tr.emit_reward(1.0)

    spans = await record(store, tracer, body)
    (op,) = named(spans, "agentbolt.operation")
    (reward,) = named(spans, semconv.REWARD_SPAN)
    (root,) = named(spans, "agentbolt.rollout")
    assert reward.parent_id == op.span_id
    assert op.parent_id == root.span_id
    assert {s.trace_id for s in spans} == {root.trace_id}


async def test_a_failing_operation_records_the_error_and_reraises(store: MemoryStore, tracer: Tracer) -> None:
    @tr.operation
    def divide(a: int, b: int) -> float:
        return a / b

    def body() -> None:
        with pytest.raises(ZeroDivisionError):
            divide(1, 0)

    spans = await record(store, tracer, body)
    (op,) = named(spans, "agentbolt.operation")
    assert op.status == SpanStatus.ERROR
    assert "agentbolt.operation.output" not in op.attributes
    assert [e.name for e in op.events] == ["exception"]


def test_operation_outside_a_rollout_just_runs_the_function() -> None:
    assert add(2, 3) == 5
    with tr.operation("free") as op:
        op.set_output("ignored")


# ----------------------------------------------------------------------------- agent names
async def test_agent_names_mark_spans_and_are_inherited_by_children(store: MemoryStore, tracer: Tracer) -> None:
    def body() -> None:
        with tr.agent("planner"):
            assert tr.current_agent_name() == "planner"
            with tr.operation("plan"):
                tr.emit_message("step 1")
        with tr.agent("solver"):
            tr.emit_reward(1.0)
        tr.emit_message("nobody's")

    spans = await record(store, tracer, body)
    agent_of = {
        s.attributes.get("agentbolt.operation.name")
        or s.attributes.get("agentbolt.message.content")
        or s.name: s.attributes.get("agentbolt.agent.name")
        for s in spans
    }
    assert agent_of == {
        "plan": "planner",
        "step 1": "planner",
        semconv.REWARD_SPAN: "solver",
        "nobody's": None,
        "agentbolt.rollout": None,
    }


async def test_every_span_carries_its_rollout_and_attempt(store: MemoryStore, tracer: Tracer) -> None:
    c = await claim(store)
    with tracer.attempt(c.rollout, c.attempt) as ctx:
        assert tr.current_context() is ctx
        assert ctx.rollout_id == c.rollout.rollout_id
        tr.emit_message("hi")
    assert tr.current_context() is None
    await tracer.flush(c.attempt.attempt_id)
    spans = await stored_spans(store, c)
    assert len(spans) == 2
    for s in spans:
        assert s.attributes[semconv.ROLLOUT_ID] == c.rollout.rollout_id
        assert s.attributes[semconv.ATTEMPT_ID] == c.attempt.attempt_id
