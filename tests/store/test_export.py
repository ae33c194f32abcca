"""Export of a run: every table written as the store holds it (JSONL, gzip, Parquet),
training samples of finished rollouts with their rewards, the selection filters, the
manifest, and streaming (small pages, however big the store)."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from adapters.spans import Attempt as SpanBuilder
from adapters.spans import user

import agentbolt
from agentbolt.retention import (
    COLUMNS,
    ExportSelection,
    MissingParquetError,
    OutputDirError,
    export_run,
)
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.base import Store
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.types import (
    AttemptStatus,
    JsonResource,
    MetricRecord,
    Page,
    Rollout,
    RolloutCreate,
    RolloutMode,
    RolloutStatus,
    Span,
)

A = AttemptStatus


@dataclass
class Filled:
    store: Store
    solved: str
    """train, resources v1, two chat calls then reward 1.0, succeeded."""
    missed: str
    """val, claimed under v2, one chat call, reward 0.0, failed."""
    running: str
    """train, one chat call, still running."""
    queued: str
    """test, never claimed."""


async def _run(store: Store, rid: str, calls: Sequence[str], reward: float | None, outcome: A | None) -> None:
    claim = await store.claim_rollout("w")
    assert claim is not None and claim.rollout.rollout_id == rid
    built = SpanBuilder(rollout_id=rid, attempt_id=claim.attempt.attempt_id)
    for i, text in enumerate(calls):
        built.chat(f"call{i}", [user(f"question {i} of {rid}")], text)
    if reward is not None:
        built.reward(reward)
    await store.add_spans(built.spans)
    if outcome is not None:
        await store.update_attempt(rid, claim.attempt.attempt_id, status=outcome)


async def fill(store: Store) -> Filled:
    await store.add_resources({"cfg": JsonResource(value=1)})
    solved = (await store.enqueue_rollout({"q": "1+1"}, resources_version=1)).rollout_id
    await _run(store, solved, ["two", "2"], 1.0, A.SUCCEEDED)
    await store.add_resources({"cfg": JsonResource(value=2)})
    missed = (await store.enqueue_rollout({"q": "2+2"}, mode=RolloutMode.VAL)).rollout_id
    await _run(store, missed, ["five"], 0.0, A.FAILED)
    running = (await store.enqueue_rollout({"q": "3+3"})).rollout_id
    await _run(store, running, ["six?"], None, None)
    queued = (await store.enqueue_rollout({"q": "4+4"}, mode=RolloutMode.TEST)).rollout_id
    await store.add_metrics([MetricRecord(run_id="grpo-1", step=s, values={"loss": 1.0 / (s + 1)}) for s in range(3)])
    await store.add_metrics([MetricRecord(run_id="other", step=0, values={"x": 1})])
    return Filled(store, solved, missed, running, queued)


@pytest.fixture
async def filled() -> Filled:
    return await fill(MemoryStore())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        return [json.loads(line) for line in f]


def read_parquet(path: Path, table: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    kinds = COLUMNS[table]
    rows = pq.read_table(path).to_pylist()
    assert list(rows[0]) == list(kinds) if rows else True
    return [
        {k: (json.loads(v) if kinds[k] == "json" and v is not None else v) for k, v in row.items()} for row in rows
    ]


async def export(store: Store, out: Path, selection: ExportSelection | None = None, **kw: Any) -> dict[str, Any]:
    await export_run(store, out, selection, progress=False, **kw)
    return json.loads((out / "manifest.json").read_text())


# ---------------------------------------------------------------- what is written
async def test_every_table_holds_what_the_store_holds(filled: Filled, tmp_path: Path) -> None:
    store = filled.store
    manifest = await export(store, tmp_path / "out", ExportSelection(metric_runs=["grpo-1"]))

    out = tmp_path / "out"
    rollouts = [Rollout.model_validate(r) for r in read_jsonl(out / "rollouts.jsonl")]
    ids = [filled.solved, filled.missed, filled.running, filled.queued]
    assert rollouts == [await store.get_rollout(rid) for rid in ids]  # by creation
    attempts = read_jsonl(out / "attempts.jsonl")
    expected_attempts = [a.model_dump(mode="json") for rid in ids for a in await store.query_attempts(rid)]
    assert attempts == expected_attempts and len(attempts) == 3
    spans = [Span.model_validate(s) for s in read_jsonl(out / "spans.jsonl")]
    assert spans == [s for rid in ids for s in await store.get_spans(rid)]
    assert [(m["run_id"], m["step"], m["values"]) for m in read_jsonl(out / "metrics.jsonl")] == [
        ("grpo-1", 0, {"loss": 1.0}), ("grpo-1", 1, {"loss": 0.5}), ("grpo-1", 2, {"loss": 1 / 3}),
    ]
    assert manifest["counts"] == {"rollouts": 4, "attempts": 3, "spans": len(spans), "samples": 3, "metrics": 3}
    assert manifest["agentbolt_version"] == agentbolt.__version__
    assert manifest["selection"]["metric_runs"] == ["grpo-1"]
    assert manifest["files"]["spans"] == "spans.jsonl"


async def test_chat_samples_are_the_finished_rollouts_calls_with_their_reward(filled: Filled, tmp_path: Path) -> None:
    await export(filled.store, tmp_path / "out")

    samples = read_jsonl(tmp_path / "out" / "samples.jsonl")

    assert [(s["rollout_id"], s["index"], s["reward"], s["status"]) for s in samples] == [
        (filled.solved, 0, 1.0, "succeeded"), (filled.solved, 1, 1.0, "succeeded"), (filled.missed, 0, 0.0, "failed"),
    ]
    assert samples[1]["messages"] == [
        {"role": "user", "content": f"question 1 of {filled.solved}"}, {"role": "assistant", "content": "2"},
    ]
    assert samples[2]["mode"] == "val"


async def test_triplet_samples_carry_token_ids_and_rewards(filled: Filled, tmp_path: Path) -> None:
    await export(filled.store, tmp_path / "out", samples="triplets")

    samples = read_jsonl(tmp_path / "out" / "samples.jsonl")

    assert [(t["rollout_id"], t["span_id"], t["reward"]) for t in samples] == [
        (filled.solved, "call0", 1.0), (filled.solved, "call1", 1.0), (filled.missed, "call0", 0.0),
    ]
    assert all(t["has_token_ids"] and t["response"]["token_ids"] for t in samples)
    assert samples[1]["response"]["token_ids"] == list(b"2")


async def test_samples_none_writes_no_samples_file(filled: Filled, tmp_path: Path) -> None:
    manifest = await export(filled.store, tmp_path / "out", samples="none")

    assert not (tmp_path / "out" / "samples.jsonl").exists()
    assert "samples" not in manifest["counts"]


async def test_gzip_writes_the_same_rows_compressed(filled: Filled, tmp_path: Path) -> None:
    await export(filled.store, tmp_path / "plain")
    manifest = await export(filled.store, tmp_path / "gz", gzip=True)

    for table, name in manifest["files"].items():
        assert name == f"{table}.jsonl.gz"
        assert read_jsonl(tmp_path / "gz" / name) == read_jsonl(tmp_path / "plain" / f"{table}.jsonl")


@pytest.mark.parametrize("samples", ["chat", "triplets"])
async def test_parquet_holds_the_same_rows_as_jsonl(filled: Filled, tmp_path: Path, samples: str) -> None:
    pytest.importorskip("pyarrow")
    selection = ExportSelection(metric_runs=["grpo-1", "other"])
    await export(filled.store, tmp_path / "jsonl", selection, samples=samples)
    manifest = await export(filled.store, tmp_path / "pq", selection, format="parquet", samples=samples)

    for table, name in manifest["files"].items():
        columns = f"samples_{samples}" if table == "samples" else table
        from_jsonl = read_jsonl(tmp_path / "jsonl" / f"{table}.jsonl")
        assert all(set(row) <= set(COLUMNS[columns]) for row in from_jsonl), f"{table}: a field has no column"
        expected = [{k: row.get(k) for k in COLUMNS[columns]} for row in from_jsonl]
        assert read_parquet(tmp_path / "pq" / name, columns) == expected, table
        assert manifest["counts"][table] == len(expected)


async def test_parquet_without_pyarrow_names_the_extra_and_writes_nothing(
    filled: Filled, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError

    with pytest.raises(MissingParquetError, match=r"agentbolt\[parquet\]"):
        await export_run(filled.store, tmp_path / "out", format="parquet", progress=False)
    assert not (tmp_path / "out").exists()


async def test_an_export_over_http_equals_one_from_the_store_itself(filled: Filled, tmp_path: Path) -> None:
    await export(filled.store, tmp_path / "local", ExportSelection(metric_runs=["grpo-1"]))
    with serve_in_thread(filled.store, admin_token="export-admin") as url:
        remote = HttpStore(url, token="export-admin")
        try:
            await export(remote, tmp_path / "remote", ExportSelection(metric_runs=["grpo-1"]))
        finally:
            await remote.close()

    for table in ("rollouts", "attempts", "spans", "samples", "metrics"):
        name = f"{table}.jsonl"
        assert read_jsonl(tmp_path / "remote" / name) == read_jsonl(tmp_path / "local" / name), table


# ---------------------------------------------------------------- the selection
async def _exported_ids(store: Store, out: Path, selection: ExportSelection) -> list[str]:
    await export(store, out, selection)
    return [r["rollout_id"] for r in read_jsonl(out / "rollouts.jsonl")]


async def test_status_and_mode_filters(filled: Filled, tmp_path: Path) -> None:
    store = filled.store
    finished = ExportSelection(status=[RolloutStatus.SUCCEEDED, RolloutStatus.FAILED])

    assert await _exported_ids(store, tmp_path / "a", finished) == [filled.solved, filled.missed]
    assert await _exported_ids(store, tmp_path / "b", ExportSelection(mode=RolloutMode.TRAIN)) == [
        filled.solved, filled.running,
    ]


async def test_explicit_ids_skip_unknown_ones(filled: Filled, tmp_path: Path) -> None:
    selection = ExportSelection(rollout_ids=[filled.queued, "nope", filled.solved])

    assert await _exported_ids(filled.store, tmp_path / "a", selection) == [filled.solved, filled.queued]
    spans = read_jsonl(tmp_path / "a" / "spans.jsonl")
    assert {s["rollout_id"] for s in spans} == {filled.solved}


async def test_created_time_window(filled: Filled, tmp_path: Path) -> None:
    store = filled.store
    created = {rid: (await store.get_rollout(rid)).created_at for rid in (filled.missed, filled.running)}
    window = ExportSelection(since=created[filled.missed], until=created[filled.running])

    assert await _exported_ids(store, tmp_path / "a", window) == [filled.missed]
    assert await _exported_ids(store, tmp_path / "b", ExportSelection(since=created[filled.running])) == [
        filled.running, filled.queued,
    ]


async def test_resources_version_range_uses_the_version_each_rollout_ran_with(filled: Filled, tmp_path: Path) -> None:
    store = filled.store

    assert await _exported_ids(store, tmp_path / "a", ExportSelection(max_resources_version=1)) == [filled.solved]
    # missed and running were enqueued without a version and claimed under v2; queued has none
    assert await _exported_ids(store, tmp_path / "b", ExportSelection(min_resources_version=2)) == [
        filled.missed, filled.running,
    ]


def test_a_selection_reads_iso_times_and_yaml(tmp_path: Path) -> None:
    path = tmp_path / "sel.yaml"
    path.write_text("since: 2026-01-31T00:00:00Z\nuntil: '2026-02-01'\nmode: val\nmetric_runs: [grpo-1]\n")

    sel = ExportSelection.from_yaml(path)

    assert (sel.since, sel.until) == (1769817600.0, 1769904000.0)
    assert sel.mode == RolloutMode.VAL and sel.metric_runs == ["grpo-1"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"since": 20.0, "until": 10.0}, "before until"),
        ({"min_resources_version": 3, "max_resources_version": 2}, "above"),
        ({"since": "last tuesday"}, "cannot read the time"),
        ({"runs": ["x"]}, "Extra inputs"),
    ],
)
def test_a_bad_selection_says_what_is_wrong(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ExportSelection.model_validate(fields)


# ---------------------------------------------------------------- the folder
async def test_a_non_empty_folder_is_refused_unless_overwrite(filled: Filled, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")

    with pytest.raises(OutputDirError, match="not empty"):
        await export_run(filled.store, out, progress=False)
    await export_run(filled.store, out, progress=False, overwrite=True)

    assert (out / "notes.txt").read_text() == "mine"
    assert len(read_jsonl(out / "rollouts.jsonl")) == 4


# ---------------------------------------------------------------- streaming
class CountingStore(MemoryStore):
    """A real MemoryStore that remembers the page sizes it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.rollout_limits: list[int] = []
        self.span_limits: list[int] = []

    async def query_rollouts(self, **kw: Any) -> Page[Rollout]:
        self.rollout_limits.append(kw.get("limit", 100))
        return await super().query_rollouts(**kw)

    async def query_spans(self, *args: Any, **kw: Any) -> Page[Span]:
        self.span_limits.append(kw.get("limit", 1000))
        return await super().query_spans(*args, **kw)


async def test_a_big_store_is_read_in_small_pages(tmp_path: Path) -> None:
    store = CountingStore()
    await store.enqueue_rollouts([RolloutCreate(input=i) for i in range(5000)])
    await store.add_metrics([MetricRecord(run_id="long", step=s, values={"v": s}) for s in range(2500)])

    manifest = await export(store, tmp_path / "out", ExportSelection(metric_runs=["long"]), page_size=250)

    assert manifest["counts"]["rollouts"] == 5000
    assert [r["input"] for r in read_jsonl(tmp_path / "out" / "rollouts.jsonl")] == list(range(5000))
    assert [m["step"] for m in read_jsonl(tmp_path / "out" / "metrics.jsonl")] == list(range(2500))
    assert max(store.rollout_limits) == 250 and len(store.rollout_limits) == 20
    assert max(store.span_limits) <= 2000
