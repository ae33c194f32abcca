"""JsonlSink: one flushed JSON line per step, appended, readable by read_jsonl."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from agentbolt.metrics import JsonlSink, read_jsonl


async def test_each_log_is_one_line_with_step_time_and_values(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "run" / "metrics.jsonl"
    sink = JsonlSink(path)

    await sink.log(0, {"train/reward_mean": 0.25, "tokens": 512, "kl": None})
    await sink.log(1, {"train/reward_mean": 0.5})
    await sink.close()

    rows = read_jsonl(path)
    assert [r["step"] for r in rows] == [0, 1]
    assert rows[0]["train/reward_mean"] == 0.25 and rows[0]["tokens"] == 512 and rows[0]["kl"] is None
    assert all(isinstance(r["time"], float) for r in rows)
    assert len(path.read_text().splitlines()) == 2


async def test_a_line_is_on_disk_before_close(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    sink = JsonlSink(path)

    await sink.log(7, {"loss": 1.5})

    assert read_jsonl(path)[0]["loss"] == 1.5  # a crash now would lose nothing
    await sink.close()


async def test_a_resumed_run_appends(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    first = JsonlSink(path)
    await first.log(0, {"x": 1})
    await first.close()

    second = JsonlSink(path)
    await second.log(1, {"x": 2})
    await second.close()

    assert [r["step"] for r in read_jsonl(path)] == [0, 1]


async def test_non_finite_numbers_are_written_as_null(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    sink = JsonlSink(path)
    await sink.log(0, {"loss": math.nan, "grad": -math.inf})
    await sink.close()

    assert read_jsonl(path)[0] | {"time": 0} == {"step": 0, "time": 0, "loss": None, "grad": None}


def test_read_jsonl_skips_a_torn_last_line_but_not_a_broken_middle(tmp_path: Path) -> None:
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"step": 0, "time": 1.0}\n{"step": 1, "ti')
    assert read_jsonl(torn) == [{"step": 0, "time": 1.0}]

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"step": 0\n{"step": 1, "time": 1.0}\n')
    with pytest.raises(ValueError, match="line 1"):
        read_jsonl(broken)
