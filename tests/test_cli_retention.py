"""``agentbolt store export`` and ``agentbolt store prune-spans`` end to end against a
SQLite store file (and a server): what they write, delete and print, and how bad input
fails (one line on stderr, exit code 2)."""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from adapters.spans import Attempt as SpanBuilder
from adapters.spans import user
from typer.testing import CliRunner, Result

from agentbolt.cli import app
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import AttemptStatus, MetricRecord

ADMIN_TOKEN = "retention-cli-admin"


@dataclass(frozen=True)
class Prepared:
    url: str
    path: Path
    done_id: str
    """Succeeded: two chat calls and a reward of 1.0 (4 spans with the root)."""
    running_id: str
    """Still running, one chat call (2 spans)."""


async def _prepare(path: Path) -> Prepared:
    async with SqliteStore(path) as store:
        done = await store.enqueue_rollout({"q": "1+1"}, rollout_id="done-1")
        running = await store.enqueue_rollout({"q": "2+2"}, rollout_id="running-1")
        for rid, calls, finish in ((done.rollout_id, 2, True), (running.rollout_id, 1, False)):
            claim = await store.claim_rollout("w")
            assert claim is not None and claim.rollout.rollout_id == rid
            built = SpanBuilder(rollout_id=rid, attempt_id=claim.attempt.attempt_id)
            for i in range(calls):
                built.chat(f"call{i}", [user(f"q{i}")], f"a{i}")
            if finish:
                built.reward(1.0)
            await store.add_spans(built.spans)
            if finish:
                await store.update_attempt(rid, claim.attempt.attempt_id, status=AttemptStatus.SUCCEEDED)
        await store.add_metrics([MetricRecord(run_id="grpo-1", step=s, values={"loss": 1.0}) for s in range(2)])
    return Prepared(f"sqlite:///{path}", path, done.rollout_id, running.rollout_id)


@pytest.fixture
def prepared(tmp_path: Path) -> Prepared:
    return asyncio.run(_prepare(tmp_path / "store.db"))


def run_cli(*args: str, input: str | None = None) -> Result:
    env: dict[str, str | None] = {"AGENTBOLT_STORE": None, "AGENTBOLT_TOKEN": None, "COLUMNS": None}
    return CliRunner().invoke(app, list(args), env=env, input=input)


def assert_one_line_error(result: Result, *fragments: str, exit_code: int = 2) -> None:
    assert result.exit_code == exit_code, result.output
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("Error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[-1]
    assert "Traceback" not in result.output


def span_count(prepared: Prepared, rollout_id: str) -> int:
    async def count() -> int:
        async with SqliteStore(prepared.path) as store:
            return len(await store.get_spans(rollout_id))

    return asyncio.run(count())


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:  # type: ignore[operator]
        return [json.loads(line) for line in f]


# ---------------------------------------------------------------- export
def test_export_writes_the_tables_and_says_how_many_rows(prepared: Prepared, tmp_path: Path) -> None:
    out = tmp_path / "export"

    result = run_cli("store", "export", str(out), "--store", prepared.url, "--metrics-run", "grpo-1")

    assert result.exit_code == 0, result.output
    assert "exported 2 rollouts, 2 attempts, 6 spans, 2 samples, 2 metrics" in result.stdout
    assert [r["rollout_id"] for r in read_jsonl(out / "rollouts.jsonl")] == [prepared.done_id, prepared.running_id]
    samples = read_jsonl(out / "samples.jsonl")
    assert [(s["rollout_id"], s["reward"]) for s in samples] == [(prepared.done_id, 1.0)] * 2
    assert json.loads((out / "manifest.json").read_text())["counts"]["spans"] == 6


def test_export_filters_and_options(prepared: Prepared, tmp_path: Path) -> None:
    out = tmp_path / "export"

    result = run_cli(
        "store", "export", str(out), "--store", prepared.url, "--status", "succeeded", "--since", "7d",
        "--samples", "triplets", "--gzip", "--json",
    )

    assert result.exit_code == 0, result.output
    manifest = json.loads(result.stdout)
    assert manifest["counts"] == {"rollouts": 1, "attempts": 1, "spans": 4, "samples": 2, "metrics": 0}
    assert manifest["selection"]["status"] == ["succeeded"] and manifest["gzip"] is True
    triplets = read_jsonl(out / "samples.jsonl.gz")
    assert [t["response"]["text"] for t in triplets] == ["a0", "a1"]


def test_export_of_the_samples_grpo_trains_on(prepared: Prepared, tmp_path: Path) -> None:
    out = tmp_path / "export"

    result = run_cli("store", "export", str(out), "--store", prepared.url, "--samples", "rl", "--json")

    assert result.exit_code == 0, result.output
    rows = read_jsonl(out / "samples.jsonl")
    # two calls on unrelated prompts: two samples, each prompt (context) + answer (trained)
    assert [(r["rollout_id"], r["index"], r["reward"]) for r in rows] == [(prepared.done_id, 0, 1.0), (prepared.done_id, 1, 1.0)]
    for i, row in enumerate(rows):
        answer = list(f"a{i}".encode())
        assert row["token_ids"][-len(answer):] == answer
        assert row["loss_mask"] == [0] * (row["num_tokens"] - len(answer)) + [1] * len(answer)
        assert row["calls"] == [{"span_id": f"call{i}", "agent_name": None, "start": row["num_tokens"] - len(answer),
                                 "length": len(answer), "trained": True, "finish_reason": "stop"}]


def test_export_to_parquet(prepared: Prepared, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "export"

    result = run_cli("store", "export", str(out), "--store", prepared.url, "--format", "parquet", "--rollout-id", "done-1")

    assert result.exit_code == 0, result.output
    assert pq.read_table(out / "rollouts.parquet").column("rollout_id").to_pylist() == ["done-1"]


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--since", "soon"], ["--since 'soon'", "7d"]),
        (["--until", "2026-13-45"], ["--until"]),
        (["--since", "2026-02-01", "--until", "2026-01-01"], ["before until"]),
        (["--min-resources-version", "3", "--max-resources-version", "2"], ["above"]),
        (["--format", "parquet", "--gzip"], ["--gzip", "jsonl"]),
    ],
)
def test_export_bad_input_is_one_line(prepared: Prepared, tmp_path: Path, extra: list[str], fragments: list[str]) -> None:
    result = run_cli("store", "export", str(tmp_path / "out"), "--store", prepared.url, *extra)

    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_folder_in_use_and_a_missing_store(prepared: Prepared, tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("x")

    assert_one_line_error(run_cli("store", "export", str(used), "--store", prepared.url), "not empty", "--overwrite")
    missing = run_cli("store", "export", str(tmp_path / "o"), "--store", f"sqlite:///{tmp_path / 'nope.db'}")
    assert_one_line_error(missing, "no store at")


# ---------------------------------------------------------------- prune-spans
def test_prune_dry_run_counts_and_deletes_nothing(prepared: Prepared) -> None:
    result = run_cli("store", "prune-spans", "--before", "2100-01-01", "--dry-run", "--store", prepared.url)

    assert result.exit_code == 0, result.output
    assert "4 spans of rollouts finished before 2100-01-01T00:00:00Z would be deleted" in result.stdout
    assert span_count(prepared, prepared.done_id) == 4


def test_prune_asks_first_and_a_no_deletes_nothing(prepared: Prepared) -> None:
    answered_no = run_cli("store", "prune-spans", "--before", "4102444800", "--store", prepared.url, input="n\n")
    no_answer = run_cli("store", "prune-spans", "--before", "4102444800", "--store", prepared.url, input="")

    for result in (answered_no, no_answer):
        assert result.exit_code == 2, result.output
        assert "Delete 4 spans of rollouts finished before 2100-01-01T00:00:00Z? [y/N]" in result.stderr
        assert "Error: nothing deleted (pass --yes" in result.stderr
    assert span_count(prepared, prepared.done_id) == 4


def test_prune_deletes_finished_rollouts_spans_only(prepared: Prepared) -> None:
    result = run_cli("store", "prune-spans", "--before", "2100-01-01", "--store", prepared.url, input="y\n")

    assert result.exit_code == 0, result.output
    assert "deleted 4 spans" in result.stdout
    assert span_count(prepared, prepared.done_id) == 0
    assert span_count(prepared, prepared.running_id) == 2


def test_prune_with_yes_json_and_vacuum(prepared: Prepared) -> None:
    result = run_cli(
        "store", "prune-spans", "--before", "2100-01-01", "--yes", "--vacuum", "--json", "--store", prepared.url
    )

    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert (answer["deleted"], answer["vacuumed"], answer["dry_run"]) == (4, True, False)


def test_prune_older_than_keeps_recent_rollouts(prepared: Prepared) -> None:
    result = run_cli("store", "prune-spans", "--older-than", "30d", "--yes", "--store", prepared.url)

    assert result.exit_code == 0, result.output
    assert "nothing to delete" in result.stdout
    assert span_count(prepared, prepared.done_id) == 4


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        ([], ["--older-than", "--before"]),
        (["--older-than", "30d", "--before", "2026-01-01"], ["one of"]),
        (["--older-than", "30x"], ["30x", "30d"]),
        (["--older-than", "0d"], ["longer than zero"]),
        (["--before", "yesterday"], ["yesterday", "ISO 8601"]),
    ],
)
def test_prune_bad_input_is_one_line(prepared: Prepared, args: list[str], fragments: list[str]) -> None:
    result = run_cli("store", "prune-spans", *args, "--yes", "--store", prepared.url)

    assert_one_line_error(result, *fragments)
    assert span_count(prepared, prepared.done_id) == 4


def test_both_commands_work_against_a_server(prepared: Prepared, tmp_path: Path) -> None:
    with serve_in_thread(SqliteStore(prepared.path), admin_token=ADMIN_TOKEN) as url:
        exported = run_cli("store", "export", str(tmp_path / "out"), "--store", url, "--token", ADMIN_TOKEN)
        vacuum = run_cli("store", "prune-spans", "--before", "2100-01-01", "--yes", "--vacuum", "--store", url,
                         "--token", ADMIN_TOKEN)
        pruned = run_cli("store", "prune-spans", "--before", "2100-01-01", "--yes", "--store", url,
                         "--token", ADMIN_TOKEN)
        no_token = run_cli("store", "prune-spans", "--before", "2100-01-01", "--yes", "--store", url)

    assert exported.exit_code == 0, exported.output
    assert len(read_jsonl(tmp_path / "out" / "spans.jsonl")) == 6
    assert_one_line_error(vacuum, "SQLite store only")
    assert pruned.exit_code == 0 and "deleted 4 spans" in pruned.stdout, pruned.output
    assert_one_line_error(no_token, "token")
    assert span_count(prepared, prepared.running_id) == 2
