"""``agentbolt store metrics``: a run's metrics as a table or JSON lines, and the runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentbolt.cli import app
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import MetricRecord


async def _prepare(path: Path) -> None:
    async with SqliteStore(path) as store:
        await store.add_metrics(
            [MetricRecord(run_id="old-run", step=0, values={"loss": 9.0})]
            + [
                MetricRecord(run_id="grpo-1", step=s, values={"train/reward_mean": s / 10, "tokens": 100 * s})
                for s in range(30)
            ]
        )
        await store.add_metrics([MetricRecord(run_id="grpo-1", step=29, values={"val/success_rate": 0.875})])


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli-metrics") / "store.db"
    asyncio.run(_prepare(path))
    return f"sqlite:///{path}"


def run_cli(*args: str) -> Result:
    env = {"AGENTBOLT_STORE": None, "AGENTBOLT_TOKEN": None, "COLUMNS": None}
    return CliRunner().invoke(app, list(args), env=env)


def test_the_table_shows_the_last_steps_with_every_metric(store_url: str) -> None:
    result = run_cli("store", "metrics", "grpo-1", "--last", "3", "--store", store_url)

    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0]
    for column in ("step", "time", "tokens", "train/reward_mean", "val/success_rate"):
        assert column in header
    rows = [line.split() for line in result.stdout.splitlines()[2:] if line.strip()]
    assert [row[0] for row in rows] == ["27", "28", "29"]
    assert "0.875" in result.stdout and "2900" in result.stdout


def test_json_lines_hold_the_records(store_url: str) -> None:
    result = run_cli("store", "metrics", "grpo-1", "-n", "2", "--json", "--store", store_url)

    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["step"] for d in docs] == [28, 29]
    assert docs[1]["values"] == {"train/reward_mean": 2.9, "tokens": 2900, "val/success_rate": 0.875}


def test_key_picks_the_columns(store_url: str) -> None:
    result = run_cli("store", "metrics", "grpo-1", "-n", "1", "-k", "tokens", "--json", "--store", store_url)

    assert json.loads(result.stdout)["values"] == {"tokens": 2900}


def test_without_a_run_id_it_lists_runs_most_recent_first(store_url: str) -> None:
    result = run_cli("store", "metrics", "--store", store_url)

    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["grpo-1", "old-run"]


def test_an_unknown_run_says_so(store_url: str) -> None:
    result = run_cli("store", "metrics", "nope", "--store", store_url)

    assert result.exit_code == 0
    assert "no metrics for run 'nope'" in result.stdout
