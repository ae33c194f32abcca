"""The dashboard's read API (``/v1/dashboard``), route by route, over a real server and a
store filled through the public Store API: rollouts in every state, a traced rollout
with a retried attempt, nested spans, a model call seen by both the gateway and the
agent's client, rewards, training metrics, two prompt versions and workers.

Every test runs against a MemoryStore and a SqliteStore behind the server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from adapters.spans import Attempt as TraceBuilder
from adapters.spans import ids_of, user

import agentbolt
from agentbolt import semconv
from agentbolt.gateway.recording import CallRecord, build_span
from agentbolt.server.dashboard import schemas
from agentbolt.server.dashboard import views as dashboard_views
from agentbolt.server.auth import mint_scoped_token
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.base import Store
from agentbolt.types import (
    LLM,
    AttemptStatus,
    ErrorInfo,
    JsonResource,
    MetricRecord,
    PromptTemplate,
    RolloutConfig,
    RolloutCreate,
    RolloutMode,
    Span,
    WorkerStatus,
)

ADMIN = "dash-admin"
DETAIL = "detail/one"  # a slash in the id: the routes take ids as paths
N_TASKS = 40
PROMPT_V1 = "You are helpful.\nAnswer: {question}\n"
PROMPT_V2 = "You are a careful math tutor.\nThink step by step.\nAnswer: {question}\n"


@dataclass
class Dash:
    client: httpx.Client
    store: Store
    token_of_detail: str


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    return response.json()["error"]["message"]


def task_input(i: int) -> dict[str, Any]:
    return {"question": f"What is {i} plus {i}?", "topic": "Geometry" if i % 5 == 0 else "algebra"}


async def _fill(store: Store) -> str:
    """Fill ``store`` through its public API; returns the detail attempt's id."""
    await store.add_resources(
        {
            "system": PromptTemplate(template=PROMPT_V1),
            "sampling": JsonResource(value={"temperature": 0.7}),
            "policy": LLM(endpoint="http://127.0.0.1:1/v1", model="m", api_key="sk-never-shown"),
        }
    )
    await store.update_resources(
        {"system": PromptTemplate(template=PROMPT_V2), "sampling": JsonResource(value={"temperature": 0.5})}
    )
    await store.update_worker("runner-1", metadata={"kind": "runner", "concurrency": 4})
    await store.update_worker("controller-1", metadata={"kind": "controller"})
    await store.update_worker("gone", status=WorkerStatus.OFFLINE)

    # the traced rollout: attempt 1 fails (retried), attempt 2 runs the agent
    retry = RolloutConfig(max_attempts=2, retry_on=[AttemptStatus.FAILED])
    await store.enqueue_rollouts([RolloutCreate(rollout_id=DETAIL, input={"question": "What is 2+2?"}, config=retry)])
    first = await store.claim_rollouts("runner-1")
    await store.update_attempt(
        DETAIL, first[0].attempt.attempt_id, status=AttemptStatus.FAILED,
        error=ErrorInfo(type="ConnectionError", message="model server went away"),
    )
    (second,) = await store.claim_rollouts("runner-1")
    attempt_id = second.attempt.attempt_id
    trace = TraceBuilder(rollout_id=DETAIL, attempt_id=attempt_id, t=time.time())
    trace.chain("agent00000000001", "invoke_agent planner",
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"})
    question = [user("What is 2+2?")]
    trace.chat("client0000000001", question, "4", agent="planner", parent="agent00000000001")
    trace.chain("tool000000000001", "execute_tool calculator",
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator", "big": "x" * 5000},
                parent="agent00000000001")
    failed = trace.chat("failed0000000001", [user("again?")], None, failed=True, parent="agent00000000001")
    failed.status_message = "RateLimitError: slow down"
    trace.reward(0.75, accuracy=1.0)
    gateway_call = build_span(
        CallRecord(
            rollout_id=DETAIL, attempt_id=attempt_id,
            request={"model": "m", "messages": question, "logprobs": True},
            response={
                "model": "m-served", "prompt_token_ids": ids_of(json.dumps(question)),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop",
                             "token_ids": ids_of("4"), "logprobs": {"content": [{"token": "4", "logprob": -0.25}]}}],
            },
            status_code=200, engine="fake", replica=0, policy_version=7,
            start_time=trace.spans[2].start_time + 0.01, end_time=trace.spans[2].start_time + 0.3, latency_ms=290.0,
        )
    )
    await store.add_spans([*trace.spans, gateway_call])
    await store.update_attempt(DETAIL, attempt_id, status=AttemptStatus.SUCCEEDED)

    # the table: 40 rollouts, some finished with rewards, failed, running, cancelled, queued
    await store.enqueue_rollouts(
        [
            RolloutCreate(rollout_id=f"task-{i:02d}", input=task_input(i),
                          mode=RolloutMode.VAL if i % 4 == 0 else RolloutMode.TRAIN,
                          resources_version=1 if i % 2 else None)
            for i in range(N_TASKS)
        ]
    )
    claims = [c for _ in range(15) for c in await store.claim_rollouts("runner-1")]
    for i, c in enumerate(claims):
        rid, aid = c.rollout.rollout_id, c.attempt.attempt_id
        if i < 10:
            await store.add_spans([Span(rollout_id=rid, attempt_id=aid, name=semconv.REWARD_SPAN,
                                        attributes=semconv.reward_span_attributes({"reward": (i % 4) / 4}, "reward"))])
            await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
        elif i < 12:
            await store.update_attempt(rid, aid, status=AttemptStatus.FAILED, error=ErrorInfo(message="boom"))
        else:
            await store.update_attempt(rid, aid, status=AttemptStatus.RUNNING)
    await store.cancel_rollout("task-39")

    records = [
        MetricRecord(
            run_id="grpo-1", step=s, values={"reward/mean": s / 10, "loss": float("nan") if s == 5 else 1 / (s + 1)}
        )
        for s in range(12)
    ]
    records.append(MetricRecord(run_id="grpo-1", step=3, values={"eval/accuracy": 0.5}))
    await store.add_metrics(records)
    await store.add_metrics([MetricRecord(run_id="apo-1", step=s, values={"score": s}) for s in range(3)])
    return attempt_id


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def dash(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    store: Store
    if request.param == "memory":
        from agentbolt.store.memory import MemoryStore

        store = MemoryStore()
    else:
        from agentbolt.store.sqlite import SqliteStore

        store = SqliteStore(Path(tmp_path_factory.mktemp("dash")) / "store.db")
    attempt_id = asyncio.run(_fill(store))
    with (
        serve_in_thread(store, admin_token=ADMIN, deadline_check=False) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as client,
    ):
        secret = asyncio.run(store.get_secret())
        yield Dash(client, store, mint_scoped_token(secret, DETAIL, attempt_id))


def table(dash: Dash, **params: Any) -> dict[str, Any]:
    return ok(dash.client.get("/v1/dashboard/rollouts", params=params))  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- rollouts table
def test_the_first_page_lists_the_newest_rollouts_with_the_row_fields_and_the_total(dash: Dash) -> None:
    page = table(dash, limit=5)
    assert page["total"] == N_TASKS + 1 and page["total_capped"] is False
    assert [r["rollout_id"] for r in page["items"]] == ["task-39", "task-38", "task-37", "task-36", "task-35"]
    row = table(dash, search="task-01")["items"][0]
    assert set(row) == {
        "rollout_id", "status", "mode", "reward", "created_at", "start_time", "end_time", "duration",
        "attempt_count", "resources_version", "worker_id", "input_preview",
    }
    assert row["status"] == "succeeded" and row["mode"] == "train" and row["reward"] == 0.25
    assert row["attempt_count"] == 1 and row["worker_id"] == "runner-1" and row["resources_version"] == 1
    assert row["duration"] == pytest.approx(row["end_time"] - row["start_time"])
    assert row["input_preview"] == '{"question":"What is 1 plus 1?","topic":"algebra"}'
    queued = table(dash, search="task-30")["items"][0]
    assert queued["worker_id"] is None and queued["duration"] is None and queued["start_time"] is None


def test_long_inputs_are_previewed_in_120_characters() -> None:
    preview = dashboard_views.input_preview({"text": "word " * 100})
    assert len(preview) == 120 and preview.endswith("…")
    assert dashboard_views.input_preview("plain\n  text") == "plain text"


def test_filters_by_status_and_mode_with_matching_totals(dash: Dash) -> None:
    done = table(dash, status="succeeded", limit=500)
    assert {r["status"] for r in done["items"]} == {"succeeded"} and done["total"] == len(done["items"]) == 11
    both = ok(dash.client.get("/v1/dashboard/rollouts", params=[("status", "failed"), ("status", "cancelled")]))
    assert both["total"] == 3 and {r["rollout_id"] for r in both["items"]} == {"task-10", "task-11", "task-39"}
    val = table(dash, mode="val", limit=500)
    assert val["total"] == 10 and all(r["mode"] == "val" for r in val["items"])


def test_search_matches_ids_and_input_text_ignoring_case(dash: Dash) -> None:
    geometry = table(dash, search="GEOMETRY", limit=500)
    assert {r["rollout_id"] for r in geometry["items"]} == {f"task-{i:02d}" for i in range(0, N_TASKS, 5)}
    assert geometry["total"] == 8 and geometry["total_capped"] is False
    assert [r["rollout_id"] for r in table(dash, search="what is 17 plus")["items"]] == ["task-17"]
    assert [r["rollout_id"] for r in table(dash, search="DETAIL/")["items"]] == [DETAIL]
    assert table(dash, search="geometry", status="queuing")["total"] == 5
    assert table(dash, search="no such words")["items"] == []


def test_sorting_by_reward_duration_and_attempts(dash: Dash) -> None:
    by_reward = table(dash, sort_by="reward", status="succeeded", limit=500)["items"]
    rewards = [r["reward"] for r in by_reward]
    assert rewards == sorted(rewards, reverse=True) and rewards[0] == 0.75
    ascending = table(dash, sort_by="duration", descending=False, status="succeeded", limit=500)["items"]
    durations = [r["duration"] for r in ascending]
    assert durations == sorted(durations)
    assert table(dash, sort_by="attempt_count")["items"][0]["rollout_id"] == DETAIL


def test_the_cursor_walks_every_row_exactly_once(dash: Dash) -> None:
    for sort_by in ("created_at", "reward", "end_time"):
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 7, "sort_by": sort_by}
            if cursor:
                params["cursor"] = cursor
            page = table(dash, **params)
            assert page["total"] == N_TASKS + 1
            seen += [r["rollout_id"] for r in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == N_TASKS + 1, sort_by


def test_bad_table_parameters_are_refused(dash: Dash) -> None:
    assert dash.client.get("/v1/dashboard/rollouts", params={"limit": 501}).status_code == 422
    assert dash.client.get("/v1/dashboard/rollouts", params={"limit": 0}).status_code == 422
    assert dash.client.get("/v1/dashboard/rollouts", params={"sort_by": "password"}).status_code == 422
    assert dash.client.get("/v1/dashboard/rollouts", params={"status": "lost"}).status_code == 422
    assert dash.client.get("/v1/dashboard/rollouts", params={"search": "x" * 201}).status_code == 422
    assert "cursor" in error(dash.client.get("/v1/dashboard/rollouts", params={"cursor": "garbage!"}), 400)


def test_a_search_total_is_capped(dash: Dash, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentbolt.server.routes import dashboard

    monkeypatch.setattr(dashboard, "TOTAL_CAP", 5)
    capped = table(dash, search="task")
    assert capped["total"] == 5 and capped["total_capped"] is True
    assert table(dash)["total"] == N_TASKS + 1, "without a search the count is exact"


# ---------------------------------------------------------------------------- rollout detail
def test_rollout_detail_has_its_attempts_with_durations_and_errors(dash: Dash) -> None:
    detail = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}"))
    assert detail["rollout"]["rollout_id"] == DETAIL and detail["rollout"]["reward"] == 0.75
    first, second = detail["attempts"]
    assert first["status"] == "failed" and first["error"]["message"] == "model server went away"
    assert second["status"] == "succeeded" and second["worker_id"] == "runner-1"
    assert second["duration"] == pytest.approx(second["end_time"] - second["start_time"])
    assert detail["resources_version"] == 2, "the version its attempt ran with"
    assert ok(dash.client.get("/v1/dashboard/rollouts/task-01"))["resources_version"] == 1


def test_unknown_ids_answer_404_with_a_message(dash: Dash) -> None:
    assert "nope" in error(dash.client.get("/v1/dashboard/rollouts/nope"), 404)
    assert "nope" in error(dash.client.get("/v1/dashboard/rollouts/nope/waterfall"), 404)
    unknown_attempt = dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}/calls", params={"attempt_id": "at-x"})
    assert "at-x" in error(unknown_attempt, 404)
    assert error(dash.client.get("/v1/dashboard/resources/99/diff"), 404)
    assert error(dash.client.get("/v1/dashboard/training/series", params={"run_id": "nope"}), 404)


# ---------------------------------------------------------------------------- waterfall
def test_the_waterfall_nests_spans_under_their_parents_in_time_order(dash: Dash) -> None:
    w = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}/waterfall"))
    attempts = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}"))["attempts"]
    assert w["attempt_id"] == attempts[-1]["attempt_id"] and w["truncated"] is False
    rows = w["spans"]
    names = [(r["name"], r["depth"], r["kind"]) for r in rows]
    assert names == [
        ("agentbolt.rollout", 0, "agent"),
        ("invoke_agent planner", 1, "agent"),
        ("chat m", 2, "llm"),
        ("chat m", 3, "llm"),  # the gateway's record of that call: inside it in time
        ("execute_tool calculator", 2, "tool"),
        ("chat m", 2, "llm"),
        ("agentbolt.reward", 1, "reward"),
    ]
    # the gateway's span has no parent in the trace: it is placed by time, and says so
    gateway = rows[3]
    assert gateway["parent_id"] is None and gateway["placed"] == "by_time"
    assert all(r["placed"] is None for r in rows if r is not gateway)
    position = {r["span_id"]: i for i, r in enumerate(rows)}
    assert all(position[r["parent_id"]] < i for i, r in enumerate(rows) if r["parent_id"] in position)
    assert w["t0"] <= min(r["start"] for r in rows) and w["t0"] == pytest.approx(attempts[-1]["start_time"])
    chat = rows[2]
    n_prompt = len(ids_of(json.dumps([user("What is 2+2?")])))
    assert chat["summary"] == f"m-served · {n_prompt} → 1 tokens · agent planner · stop"
    assert rows[5]["status"] == "error" and "RateLimitError: slow down" in rows[5]["summary"]
    assert rows[4]["summary"] == "calculator"
    assert rows[4]["attributes_preview"]["big"].endswith("…") and len(rows[4]["attributes_preview"]["big"]) == 200
    assert "agentbolt.llm.request" not in chat["attributes_preview"]
    assert rows[6]["summary"] == "reward = 0.75 (accuracy = 1)"
    assert all(len(r["summary"]) <= 160 for r in rows)
    assert [(m["name"], m["value"]) for m in w["rewards"]] == [("reward", 0.75), ("accuracy", 1.0)]
    assert w["rewards"][0]["time"] == rows[6]["end"]


def _span(span_id: str, start: float, end: float | None, parent: str | None = None, name: str = "step") -> Span:
    return Span(rollout_id="r", attempt_id="a", span_id=span_id, parent_id=parent, name=name,
                start_time=start, end_time=end)


def _gateway_span(start: float, end: float) -> Span:
    return build_span(CallRecord(
        rollout_id="r", attempt_id="a", request={"model": "m", "messages": [user("hi")]},
        response={"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "yo"},
                                             "finish_reason": "stop"}]},
        status_code=200, engine="fake", replica=0, policy_version=1, start_time=start, end_time=end, latency_ms=1.0,
    ))


def rows_of(spans: list[Span]) -> list[tuple[str, int, str | None]]:
    w = dashboard_views.waterfall(spans, attempt_id="a", attempt_start=None, truncated=False)
    return [(r["span_id"], r["depth"], r["placed"]) for r in w["spans"]]


def test_a_parentless_model_call_goes_under_the_innermost_span_enclosing_it_in_time() -> None:
    rollout = _span("rollout", 0.0, 10.0, name="agentbolt.rollout")
    call = _gateway_span(2.0, 3.0)
    assert call.parent_id is None
    rows = rows_of([rollout, call])
    assert rows == [("rollout", 0, None), (call.span_id, 1, "by_time")]
    w = dashboard_views.waterfall([rollout, call], attempt_id="a", attempt_start=None, truncated=False)
    assert (w["spans"][1]["kind"], w["spans"][1]["parent_id"]) == ("llm", None)  # the recorded parent is kept

    # the deepest enclosing span wins; one that only overlaps does not count
    step = _span("step", 1.0, 4.0, parent="rollout")
    overlapping = _span("overlap", 2.5, 6.0, parent="step")
    assert rows_of([rollout, step, overlapping, call]) == [
        ("rollout", 0, None), ("step", 1, None), (call.span_id, 2, "by_time"), ("overlap", 2, None)]

    # nothing encloses it (after the rollout ended, or still running): it stays a root
    late, running = _gateway_span(11.0, 12.0), _span("running", 5.0, None)
    assert rows_of([rollout, late, running]) == [("rollout", 0, None), ("running", 0, None), (late.span_id, 0, None)]

    # two parentless spans over the same time: one goes under the other, never in a loop
    twin_a, twin_b = _span("twin-a", 0.0, 10.0), _span("twin-b", 0.0, 10.0)
    (outer, depth0, mark0), (inner, depth1, mark1) = rows_of([twin_a, twin_b])
    assert {outer, inner} == {"twin-a", "twin-b"} and (depth0, mark0, depth1, mark1) == (0, None, 1, "by_time")


def test_an_earlier_attempt_has_its_own_empty_waterfall_and_unclaimed_rollouts_have_none(dash: Dash) -> None:
    first = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}"))["attempts"][0]["attempt_id"]
    w = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}/waterfall", params={"attempt_id": first}))
    assert w["attempt_id"] == first and w["spans"] == [] and w["rewards"] == []
    queued = ok(dash.client.get("/v1/dashboard/rollouts/task-30/waterfall"))
    assert queued == {"attempt_id": None, "t0": None, "spans": [], "rewards": [], "truncated": False}


def test_a_waterfall_over_the_span_limit_is_truncated(dash: Dash, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard_views, "MAX_WATERFALL_SPANS", 3)
    w = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}/waterfall"))
    assert w["truncated"] is True and len(w["spans"]) == 3


# ---------------------------------------------------------------------------- model calls
def test_model_calls_show_prompts_responses_tokens_and_policy_version_once_each(dash: Dash) -> None:
    answer = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}/calls"))
    calls = answer["calls"]
    assert len(calls) == 2, "the client's span of the gateway call is the same call"
    call, failed = calls
    assert call["prompt_messages"] == [{"role": "user", "content": "What is 2+2?"}]
    assert call["response_text"] == "4" and call["finish_reason"] == "stop" and call["model"] == "m-served"
    assert call["prompt_tokens"] == len(ids_of(json.dumps([user("What is 2+2?")]))) and call["completion_tokens"] == 1
    assert call["has_token_ids"] is True and call["policy_version"] == 7
    assert call["logprobs"] == {"mean": -0.25, "min": -0.25, "n": 1}
    assert call["failed"] is False and call["error"] is None and call["prompt_text"] is None
    assert call["duration"] == pytest.approx(call["end"] - call["start"])
    assert failed["failed"] is True and failed["error"] == "RateLimitError: slow down"
    assert failed["response_text"] is None and failed["agent_name"] == "planner"


def test_long_messages_are_clipped_to_4000_characters() -> None:
    trace = TraceBuilder()
    trace.chat("long000000000001", [user("y" * 10_000)], "z" * 20_000)
    (call,) = dashboard_views.call_views(trace.spans)
    assert len(call["prompt_messages"][0]["content"]) == 4000
    assert len(call["response_text"]) == dashboard_views.RESPONSE_CHARS


# ---------------------------------------------------------------------------- training
def test_training_runs_list_their_steps_and_metric_names(dash: Dash) -> None:
    runs = [r for r in ok(dash.client.get("/v1/dashboard/training/runs"))["runs"] if r["run_id"] != "live-1"]
    assert [r["run_id"] for r in runs] == ["apo-1", "grpo-1"], "most recently written first"
    grpo = runs[1]
    assert (grpo["first_step"], grpo["last_step"], grpo["n_records"]) == (0, 11, 12)
    assert grpo["keys"] == ["eval/accuracy", "loss", "reward/mean"] and grpo["last_time"] > 0


def test_the_runs_list_follows_a_live_run_including_metrics_merged_into_its_last_step(dash: Dash) -> None:
    def live() -> dict[str, Any]:
        runs = ok(dash.client.get("/v1/dashboard/training/runs"))["runs"]
        return next(r for r in runs if r["run_id"] == "live-1")

    asyncio.run(dash.store.add_metrics([MetricRecord(run_id="live-1", step=s, values={"loss": 1.0}) for s in range(3)]))
    assert (live()["n_records"], live()["last_step"], live()["keys"]) == (3, 2, ["loss"])
    asyncio.run(dash.store.add_metrics([MetricRecord(run_id="live-1", step=2, values={"eval/accuracy": 0.9}),
                                        MetricRecord(run_id="live-1", step=3, values={"loss": 0.5})]))
    assert live() == live(), "polling again counts nothing twice"
    assert (live()["n_records"], live()["last_step"]) == (4, 3)
    assert live()["keys"] == ["eval/accuracy", "loss"] and live()["first_step"] == 0


def test_series_refresh_incrementally_after_a_step(dash: Dash) -> None:
    params: list[tuple[str, Any]] = [("run_id", "grpo-1"), ("keys", "reward/mean"), ("keys", "loss")]
    full = ok(dash.client.get("/v1/dashboard/training/series", params=params))
    assert set(full["series"]) == {"reward/mean", "loss"} and full["last_step"] == 11 and full["more"] is False
    assert full["series"]["reward/mean"][:2] == [[0, 0.0], [1, 0.1]]
    assert full["series"]["loss"][5] == [5, None], "a NaN is logged as a gap"
    newer = ok(dash.client.get("/v1/dashboard/training/series", params=[*params, ("after_step", 9)]))
    assert newer["series"]["reward/mean"] == [[10, 1.0], [11, 1.1]] and newer["last_step"] == 11
    idle = ok(dash.client.get("/v1/dashboard/training/series", params=[*params, ("after_step", 11)]))
    assert idle["series"] == {"reward/mean": [], "loss": []} and idle["last_step"] == 11
    every = ok(dash.client.get("/v1/dashboard/training/series", params={"run_id": "grpo-1"}))
    assert every["series"]["eval/accuracy"] == [[3, 0.5]]


# ---------------------------------------------------------------------------- resources
def test_resources_versions_come_newest_first_with_their_prompt_templates(dash: Dash) -> None:
    page = ok(dash.client.get("/v1/dashboard/resources", params={"limit": 1}))
    (v2,) = page["items"]
    assert v2["version"] == 2 and v2["names"] == ["policy", "sampling", "system"]
    assert v2["prompt_templates"] == {"system": PROMPT_V2} and v2["kinds"]["policy"] == "llm"
    (v1,) = ok(dash.client.get("/v1/dashboard/resources", params={"cursor": page["next_cursor"]}))["items"]
    assert v1["version"] == 1 and v1["prompt_templates"] == {"system": PROMPT_V1}
    assert "sk-never-shown" not in json.dumps([v1, v2]), "model endpoint keys stay out of the page"


def test_a_version_diff_shows_what_changed_against_the_previous_one(dash: Dash) -> None:
    d = ok(dash.client.get("/v1/dashboard/resources/2/diff"))
    assert d["version"] == 2 and d["against"] == 1 and set(d["diffs"]) == {"system", "sampling"}
    system = d["diffs"]["system"]
    assert system["before"] == PROMPT_V1 and system["after"] == PROMPT_V2 and system["changed"] is True
    assert system["unified"].splitlines()[:2] == ["--- v1/system", "+++ v2/system"]
    assert "-You are helpful.\n" in system["unified"] and "+Think step by step.\n" in system["unified"]
    assert " Answer: {question}\n" in system["unified"]
    assert '-  "temperature": 0.7' in d["diffs"]["sampling"]["unified"]
    first = ok(dash.client.get("/v1/dashboard/resources/1/diff"))
    assert first["against"] is None and first["diffs"]["system"]["before"] is None
    same = ok(dash.client.get("/v1/dashboard/resources/2/diff", params={"against": 2}))
    assert same["diffs"]["system"] == {"before": PROMPT_V2, "after": PROMPT_V2, "changed": False, "unified": ""}


# ---------------------------------------------------------------------------- workers & summary
def test_workers_show_kind_heartbeat_age_and_current_rollout(dash: Dash) -> None:
    answer = ok(dash.client.get("/v1/dashboard/workers"))
    workers = {w["worker_id"]: w for w in answer["workers"]}
    assert set(workers) == {"runner-1", "controller-1", "gone"}
    runner = workers["runner-1"]
    assert runner["kind"] == "runner" and runner["status"] == "busy" and runner["alive"] is True
    assert runner["current_rollout_id"] is not None and runner["metadata"]["concurrency"] == 4
    assert 0 <= runner["heartbeat_age"] == pytest.approx(answer["now"] - runner["last_heartbeat_time"])
    assert workers["controller-1"]["kind"] == "controller"
    assert workers["gone"]["kind"] == "unknown" and workers["gone"]["alive"] is False


def test_the_summary_is_a_cheap_health_badge(dash: Dash) -> None:
    s = ok(dash.client.get("/v1/dashboard/summary"))
    assert s["health"] == "ok" and s["problems"] == []
    assert s["store"] == type(dash.store).__name__ and s["version"] == agentbolt.__version__
    assert s["rollouts_by_status"]["queuing"] == s["queue_depth"] == 24
    assert s["rollouts_by_status"]["succeeded"] == 11 and s["total_rollouts"] == N_TASKS + 1
    assert s["workers_alive"] == 2 and s["latest_resources_version"] == 2
    assert abs(s["server_time"] - time.time()) < 60


async def test_the_summary_is_degraded_when_the_queue_waits_and_no_worker_lives() -> None:
    from agentbolt.store.memory import MemoryStore

    store = MemoryStore()
    await store.enqueue_rollout({"q": 1})
    with serve_in_thread(store, admin_token=ADMIN) as url:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as client:
            s = (await client.get("/v1/dashboard/summary")).json()
    assert s["health"] == "degraded" and s["problems"] == ["1 rollouts are queued but no worker is alive"]


# ---------------------------------------------------------------------------- auth & schema
ROUTES = [
    "/v1/dashboard/rollouts",
    f"/v1/dashboard/rollouts/{DETAIL}",
    f"/v1/dashboard/rollouts/{DETAIL}/waterfall",
    f"/v1/dashboard/rollouts/{DETAIL}/calls",
    f"/v1/dashboard/rollouts/{DETAIL}/lineage",
    "/v1/dashboard/training/runs",
    "/v1/dashboard/training/series?run_id=grpo-1",
    "/v1/dashboard/training/rows?run_id=grpo-1",
    "/v1/dashboard/resources",
    "/v1/dashboard/resources/2/diff",
    "/v1/dashboard/workers",
    "/v1/dashboard/summary",
]


def test_every_route_needs_the_admin_token(dash: Dash) -> None:
    base = dash.client.base_url
    for route in ROUTES:
        assert httpx.get(base.join(route)).status_code == 401, route
        assert httpx.get(base.join(route), headers={"Authorization": "Bearer wrong"}).status_code == 403, route
        scoped = httpx.get(base.join(route), headers={"Authorization": f"Bearer {dash.token_of_detail}"})
        assert scoped.status_code == 403, route
        assert dash.client.get(route).status_code == 200, route


def test_openapi_documents_every_dashboard_route_with_its_answer_model(dash: Dash) -> None:
    schema = ok(dash.client.get("/openapi.json"))
    ops = {path: item["get"] for path, item in schema["paths"].items() if path.startswith("/v1/dashboard")}
    assert len(ops) == 12
    assert all(op["summary"] and op["tags"] == ["dashboard"] for op in ops.values())
    answer = ops["/v1/dashboard/rollouts"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/RolloutTable"}


ANSWER_MODELS = [
    schemas.RolloutTable, schemas.RolloutDetail, schemas.Waterfall, schemas.CallList, schemas.Lineage,
    schemas.RunList, schemas.MetricSeries, schemas.RowSteps, schemas.ResourceVersionPage, schemas.ResourceDiff,
    schemas.WorkerList,
    schemas.DashboardSummary,
]


def test_every_answer_matches_its_documented_model(dash: Dash) -> None:
    for route, model in zip(ROUTES, ANSWER_MODELS, strict=True):
        model.model_validate(ok(dash.client.get(route)))  # extra fields are refused too
    for params in ({"search": "task-3"}, {"status": "queuing", "limit": 2}):
        schemas.RolloutTable.model_validate(table(dash, **params))
    first = ok(dash.client.get(f"/v1/dashboard/rollouts/{DETAIL}"))["attempts"][0]["attempt_id"]
    for part, model in (("waterfall", schemas.Waterfall), ("calls", schemas.CallList), ("lineage", schemas.Lineage)):
        earlier = f"/v1/dashboard/rollouts/{DETAIL}/{part}?attempt_id={first}"
        never_claimed = f"/v1/dashboard/rollouts/task-30/{part}"
        for route in (earlier, never_claimed):
            model.model_validate(ok(dash.client.get(route)))
    schemas.ResourceDiff.model_validate(ok(dash.client.get("/v1/dashboard/resources/1/diff")))
