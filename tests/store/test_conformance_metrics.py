"""Conformance: training metrics — upsert and merge by (run_id, step), step order, the
``after_step`` polling cursor, limits, the runs list, validation and HTTP permissions."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.base import Store
from agentbolt.store.errors import InvalidRequestError, PermissionDeniedError
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import MetricRecord

ADMIN_TOKEN = "metrics-admin"


def rec(step: int, run_id: str = "run-a", **values: float | int | None) -> MetricRecord:
    return MetricRecord(run_id=run_id, step=step, values=values, timestamp=1000.0 + step)


async def test_a_new_run_has_no_metrics(store: Store) -> None:
    assert await store.query_metrics("nobody") == []
    assert await store.metric_runs() == []


async def test_records_come_back_as_written(store: Store) -> None:
    await store.add_metrics([rec(0, loss=2.5, tokens=128, kl=None)])

    (got,) = await store.query_metrics("run-a")

    assert got == rec(0, loss=2.5, tokens=128, kl=None)
    assert isinstance(got.values["tokens"], int) and isinstance(got.values["loss"], float)


async def test_a_second_write_to_a_step_merges_into_it(store: Store) -> None:
    await store.add_metrics([rec(3, **{"train/reward": 0.5, "train/kl": 0.01})])
    later = MetricRecord(run_id="run-a", step=3, values={"val/success_rate": 0.8, "train/kl": 0.02}, timestamp=2000.0)

    await store.add_metrics([later])

    (got,) = await store.query_metrics("run-a")
    assert got.values == {"train/reward": 0.5, "train/kl": 0.02, "val/success_rate": 0.8}
    assert got.timestamp == 2000.0


async def test_resending_the_same_records_changes_nothing(store: Store) -> None:
    batch = [rec(0, loss=1.0), rec(1, loss=0.5)]
    await store.add_metrics(batch)
    await store.add_metrics(batch)

    assert await store.query_metrics("run-a") == batch


async def test_records_of_one_call_for_one_step_merge_in_order(store: Store) -> None:
    await store.add_metrics([rec(0, a=1, b=1), rec(0, b=2, c=3)])

    (got,) = await store.query_metrics("run-a")

    assert got.values == {"a": 1, "b": 2, "c": 3}


async def test_steps_come_in_ascending_order_whatever_the_write_order(store: Store) -> None:
    await store.add_metrics([rec(s, x=s) for s in (5, 1, 10, 0, 3)])
    await store.add_metrics([rec(2, x=2)])

    assert [r.step for r in await store.query_metrics("run-a")] == [0, 1, 2, 3, 5, 10]


async def test_after_step_returns_only_later_steps_for_polling(store: Store) -> None:
    await store.add_metrics([rec(s, x=s) for s in range(5)])
    seen = await store.query_metrics("run-a")
    await store.add_metrics([rec(5, x=5), rec(6, x=6)])

    new = await store.query_metrics("run-a", after_step=seen[-1].step)

    assert [r.step for r in new] == [5, 6]
    assert await store.query_metrics("run-a", after_step=6) == []
    assert [r.step for r in await store.query_metrics("run-a", after_step=-1)] == list(range(7))


async def test_limit_caps_a_page_and_after_step_continues_it(store: Store) -> None:
    await store.add_metrics([rec(s, x=s) for s in range(10)])

    first = await store.query_metrics("run-a", limit=4)
    second = await store.query_metrics("run-a", after_step=first[-1].step, limit=4)

    assert [r.step for r in first] == [0, 1, 2, 3]
    assert [r.step for r in second] == [4, 5, 6, 7]


@pytest.mark.parametrize("limit", [0, 10_001])
async def test_a_limit_out_of_range_is_an_invalid_request(store: Store, limit: int) -> None:
    with pytest.raises(InvalidRequestError):
        await store.query_metrics("run-a", limit=limit)
    with pytest.raises(InvalidRequestError):
        await store.metric_runs(limit=limit)


async def test_runs_are_kept_apart(store: Store) -> None:
    await store.add_metrics([rec(0, "run-a", x=1), rec(0, "run-b", x=2)])

    assert [r.values for r in await store.query_metrics("run-a")] == [{"x": 1}]
    assert [r.values for r in await store.query_metrics("run-b")] == [{"x": 2}]


async def test_runs_are_listed_most_recently_written_first(store: Store) -> None:
    await store.add_metrics([rec(0, "old", x=1)])
    await store.add_metrics([rec(0, "middle", x=1)])
    await store.add_metrics([rec(0, "new", x=1)])
    assert await store.metric_runs() == ["new", "middle", "old"]

    await store.add_metrics([rec(1, "old", x=1)])

    assert await store.metric_runs() == ["old", "new", "middle"]
    assert await store.metric_runs(limit=2) == ["old", "new"]


async def test_an_empty_call_stores_nothing(store: Store) -> None:
    await store.add_metrics([])
    assert await store.metric_runs() == []


async def test_non_finite_values_are_stored_as_none(store: Store) -> None:
    await store.add_metrics([rec(0, loss=math.nan, grad=math.inf, ok=1.0)])

    (got,) = await store.query_metrics("run-a")

    assert got.values == {"loss": None, "grad": None, "ok": 1.0}


@pytest.mark.parametrize(
    "fields",
    [
        {"run_id": "", "step": 0},
        {"run_id": "x" * 201, "step": 0},
        {"run_id": "r", "step": -1},
        {"run_id": "r", "step": 0, "values": {"loss": "high"}},
        {"run_id": "r", "step": 0, "values": {"": 1.0}},
        {"run_id": "r", "step": 0, "values": {"big": 2**70}},
        {"run_id": "r", "step": 0, "extra": 1},
    ],
)
def test_invalid_records_are_refused(fields: dict) -> None:
    with pytest.raises(ValidationError):
        MetricRecord(**fields)


def test_booleans_become_integers() -> None:
    assert MetricRecord(run_id="r", step=0, values={"done": True}).values == {"done": 1}


# ---------------------------------------------------------------- HTTP specifics
async def test_a_rollout_scoped_token_may_not_touch_metrics() -> None:
    server_store = MemoryStore()
    await server_store.add_metrics([rec(0, x=1)])
    with serve_in_thread(server_store, admin_token=ADMIN_TOKEN) as url:
        admin = HttpStore(url, token=ADMIN_TOKEN)
        await admin.enqueue_rollout("task")
        claim = await admin.claim_rollout("w")
        assert claim is not None and claim.token
        agent = HttpStore(url, token=claim.token, max_retries=0)
        try:
            with pytest.raises(PermissionDeniedError):
                await agent.add_metrics([rec(1, x=1)])
            with pytest.raises(PermissionDeniedError):
                await agent.query_metrics("run-a")
            with pytest.raises(PermissionDeniedError):
                await agent.metric_runs()
        finally:
            await agent.close()
            await admin.close()
    assert [r.step for r in await server_store.query_metrics("run-a")] == [0]


def test_metric_routes_are_in_the_openapi_schema(tmp_path: Path) -> None:
    with serve_in_thread(SqliteStore(tmp_path / "s.db"), admin_token=ADMIN_TOKEN) as url:
        paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    assert set(paths["/v1/metrics"]) == {"get", "post"}
    assert "get" in paths["/v1/metrics/runs"]


def test_a_bad_post_is_a_422_that_names_the_field() -> None:
    with serve_in_thread(MemoryStore(), admin_token=ADMIN_TOKEN) as url:
        answer = httpx.post(
            f"{url}/v1/metrics",
            json={"records": [{"run_id": "r", "step": -1, "values": {}}]},
            headers={"authorization": f"Bearer {ADMIN_TOKEN}"},
        )
    assert answer.status_code == 422
    assert "step" in answer.json()["error"]["message"]
