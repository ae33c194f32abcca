"""The benchmark scripts run (seconds-long smoke mode). Their figures are not checked:
timings do not belong in pass/fail tests on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_store_throughput_smoke_mode_reports_every_cell() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "store_throughput.py"), "--smoke", "--json",
         "--backends", "memory,sqlite,http", "--concurrency", "1,16"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert {(r["backend"], r["concurrency"]) for r in rows} == {
        (b, c) for b in ("memory", "sqlite", "http") for c in (1, 16)
    }
    assert all(r["rollouts_per_s"] > 0 for r in rows)


def test_store_throughput_smoke_mode_runs_postgres_and_servers_over_it_with_tasks_in_processes() -> None:
    from tests.store.postgres_support import POSTGRES_URL, require_postgres

    require_postgres()
    rows = _json_rows("store_throughput.py", "--backends", "postgres,http-postgres", "--runners", "8",
                      "--processes", "2", "--servers", "2", "--cpu", "--postgres-url", POSTGRES_URL)
    assert [(r["backend"], r["processes"], r["servers"]) for r in rows] == [("postgres", 1, 1), ("http-postgres", 2, 2)]
    assert all(r["rollouts"] == 40 and r["rollouts_per_s"] > 0 for r in rows)
    # the CPU of each role in the timed window (the servers worked, and so did the clients),
    # and the transactions PostgreSQL committed meanwhile
    cpu = rows[1]["cpu_seconds"]
    assert set(cpu) == {"servers", "clients", "postgres", "bench", "pg_commits"}
    # group commit: concurrent writes share transactions, so fewer commits than rollouts is fine
    assert cpu["servers"] > 0 and cpu["clients"] > 0 and cpu["pg_commits"] > 0


def _json_rows(script: str, *args: str) -> list[dict]:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--smoke", "--json", *args],
                         capture_output=True, text=True, timeout=300, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_grpo_update_smoke_mode_times_one_agentbolt_update() -> None:
    *rows, summary = _json_rows("grpo_update.py")
    assert [r["impl"] for r in rows] == ["agentbolt"]  # smoke mode runs without the TRL peer
    (row,) = rows
    assert row["model"] == "tiny" and row["reps"] == 1 and len(row["all_seconds"]) == 1
    assert row["seconds_per_update"] > 0 and row["trained_tokens_per_s"] > 0
    assert summary == {"peer_over_agentbolt_time": None}


def test_async_speedup_smoke_mode_trains_both_schedules() -> None:
    sync, async_, summary = _json_rows("async_speedup.py")
    assert (sync["schedule"], async_["schedule"]) == ("sync", "async")
    assert sync["steps"] == async_["steps"] == 2
    assert async_["in_flight_groups"] == 2 * sync["in_flight_groups"]  # the library default: 2 x tasks_per_step
    assert sync["runners"] == async_["runners"] == 1  # the agent ran in a runner process of its own
    assert async_["rollouts_started"] >= async_["rollouts_trained"] > 0  # read back from the run's store
    assert sync["rollouts_trained"] > 0 and async_["rollouts_trained"] > 0
    assert sync["lag_max"] == 0  # sync trains only on the current policy's tokens
    assert async_["lag_max"] is not None and async_["lag_max"] <= 1  # bounded by max_policy_lag
    assert summary["speedup_async_over_sync"] > 0


def test_prefill_smoke_mode_measures_cold_prompts_and_a_cached_follow_up_turn() -> None:
    header, skipped, *rows = _json_rows("prefill.py")
    assert header["lengths"] == [32, 64, header["context_limit"] - 1] and header["scheduler"] == "continuous"
    assert skipped == {"engine": "llama.cpp", "skipped": "smoke mode: the tiny random model has no GGUF"}
    assert [r["length"] for r in rows] == header["lengths"]
    assert all(r["cold_tokens_per_s"] > 0 for r in rows)
    for row in rows[:2]:  # a follow-up turn prefills only the answer token and the new tokens: the rest is cached
        assert row["follow_up_tokens"] == row["length"] + 1 + header["follow_up_new_tokens"]
        assert row["follow_up_prefilled"] == 1 + header["follow_up_new_tokens"]
    assert "follow_up_s" not in rows[2]  # at the context limit there is no room for another turn


def test_episode_smoke_mode_plays_a_multi_turn_episode_that_prefills_only_new_tokens() -> None:
    header, ours, skipped = _json_rows("episode.py")
    assert header["turns"] == ours["turns"] == 3 and ours["engine"] == "agentbolt"
    assert skipped["engine"] == "llama.cpp" and "smoke mode" in skipped["skipped"]
    # after the first turn, only the new turns are prefilled: far fewer tokens than the prompts hold
    later_prompts = ours["prompt_tokens_total"] - ours["prefilled_total"]
    assert ours["prefilled_per_later_turn"] < header["system_tokens"] and later_prompts > 2 * header["system_tokens"]


def test_update_matmuls_smoke_mode_records_the_updates_products_and_times_them_against_a_peak() -> None:
    (row,) = _json_rows("update_matmuls.py")
    assert row["model"] == "tiny" and row["threads"] == 1 and row["samples"] == 8
    # every product of the update recorded, forward and backward, with FLOPs and a stand-alone time
    assert row["products"] > 0 and row["distinct_shapes"] > 0 and row["gflop"] > 0 and row["alone_s"] > 0
    classes = {c["class"]: c for c in row["classes"]}
    assert {"MLP proj fwd", "MLP proj input-grad", "LoRA A/B fwd", "LoRA A/B input-grad", "LoRA weight-grad",
            "k/v proj fwd", "lm_head fwd"} <= set(classes)
    assert sum(c["calls"] for c in classes.values()) == row["products"]
    assert abs(sum(c["gflop"] for c in classes.values()) - row["gflop"]) < 1e-2
    # the peak is at least the best of the update's own shapes, so the ratio is in (0, 1]
    assert row["peak_gflops"] >= row["best_shape"]["gflops"] > 0
    assert 0 < row["ratio"] <= 1 and row["target"] == 0.7 and row["target_met"] == (row["ratio"] >= 0.7)
    assert 0 < row["matmul_share_of_update"] < 1
    assert row["attention"]["sdpa fwd"]["calls"] > 0
