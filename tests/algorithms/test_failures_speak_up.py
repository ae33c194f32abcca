"""Failures speak up, early: a broken agent stops the run with its most common error,
logged once, and long work prints progress even when the console is not a terminal."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import agentbolt
from agentbolt.algorithms import Evaluate
from agentbolt.algorithms.failures import NoSuccessfulRolloutsError, failure_report
from agentbolt.runner.error_log import PROCESS_ERRORS, FirstSeenErrors, error_key
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, ErrorInfo


def broken_agent(task: Any) -> float:
    """What a fresh machine without ``openai`` did to every rollout of the main job."""
    raise ImportError("No module named 'openai'")


def _warnings_about(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()
            and r.name == "agentbolt.runner" and "the agent raised" in r.getMessage()]


def _tiny_gateway() -> Any:
    """A seeded tiny byte-level model behind the local engine (answers of 2 tokens)."""
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway
    from agentbolt.models import tiny_model

    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=32, n_layers=1)
    return Gateway(TransformersEngine(model, tokenizer, max_batch_size=8, num_threads=1, default_max_tokens=2))


@pytest.fixture(autouse=True)
def _fresh_error_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: no error seen yet."""
    monkeypatch.setattr(PROCESS_ERRORS, "_counts", FirstSeenErrors()._counts)


def test_an_evaluation_where_nothing_succeeded_names_the_error_and_how_to_see_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentbolt")
    trainer = agentbolt.Trainer(algorithm=Evaluate(show=False, progress=False), n_runners=1,
                                runner=agentbolt.Runner(concurrency=4))
    with pytest.raises(NoSuccessfulRolloutsError) as info:
        trainer.fit(broken_agent, [{"q": i} for i in range(12)])
    message = str(info.value)
    assert "none of 12 rollouts succeeded" in message
    assert "ImportError: No module named 'openai'" in message and "(12 of 12)" in message
    assert "agentbolt store rollout ro-" in message
    assert len(_warnings_about(caplog, "ImportError")) == 1  # once, not 12 times


def test_grpo_stops_within_three_steps_naming_the_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    gateway = _tiny_gateway()
    from agentbolt.algorithms.grpo import GRPO, GRPOConfig

    caplog.set_level(logging.WARNING, logger="agentbolt")
    config = GRPOConfig(max_steps=10, tasks_per_step=2, group_size=2, lora=None, run_dir=str(tmp_path / "run"),
                        progress=False, eval_before=False, eval_after=False, checkpoint_every=0)
    trainer = agentbolt.Trainer(algorithm=GRPO(config), n_runners=1, runner=agentbolt.Runner(concurrency=4),
                                gateway=gateway, store=f"sqlite:///{tmp_path / 'store.db'}")
    with pytest.raises(NoSuccessfulRolloutsError) as info:
        trainer.fit(broken_agent, [{"prompt": f"p{i}"} for i in range(8)])
    message = str(info.value)
    assert "GRPO stopped after 3 steps in a row (step 3)" in message
    assert "ImportError: No module named 'openai'" in message and "(4 of 4)" in message
    assert f"--store sqlite:///{tmp_path / 'store.db'}" in message
    assert len(_warnings_about(caplog, "ImportError")) == 1  # 12 failed rollouts, one warning


def test_grpo_evaluation_before_training_stops_a_broken_agent_at_once(tmp_path: Path) -> None:
    gateway = _tiny_gateway()
    from agentbolt.algorithms.grpo import GRPO, GRPOConfig

    config = GRPOConfig(max_steps=10, tasks_per_step=2, group_size=2, lora=None, run_dir=str(tmp_path / "run"),
                        progress=False)
    trainer = agentbolt.Trainer(algorithm=GRPO(config), n_runners=1, runner=agentbolt.Runner(concurrency=4),
                                gateway=gateway)
    with pytest.raises(NoSuccessfulRolloutsError, match=r"GRPO held-out before training: none of 3 rollouts"):
        trainer.fit(broken_agent, [{"prompt": "a"}] * 4, [{"prompt": "b"}] * 3)


async def test_the_report_counts_the_most_common_error_of_the_latest_attempts() -> None:
    store = MemoryStore()
    ids = []
    for i in range(5):
        await store.enqueue_rollout({"i": i})
        claim = await store.claim_rollout(worker_id="w")
        assert claim is not None
        error = ("KeyError", "'x'") if i < 3 else ("ValueError", f"bad value {i}")
        await store.update_attempt(claim.rollout.rollout_id, claim.attempt.attempt_id,
                                   status=AttemptStatus.FAILED, error=ErrorInfo(type=error[0], message=error[1]))
        ids.append(claim.rollout.rollout_id)
    rollouts = await store.wait_for_rollouts(ids)
    report = await failure_report(store, rollouts)
    assert (report.total, report.succeeded, report.error_type, report.error_count) == (5, 0, "KeyError", 3)
    assert report.example_rollout_id == ids[0] and report.store is None
    assert "the store is in memory" in report.describe("x")


def test_errors_differing_only_in_numbers_are_one_kind() -> None:
    assert error_key("TimeoutError", "took 3.1 s") == error_key("TimeoutError", "took 12.7 s")
    assert error_key("KeyError", "'a'") != error_key("KeyError", "'b'")


def test_a_run_whose_console_is_not_a_terminal_prints_a_line_per_step(tmp_path: Path) -> None:
    """CI, nohup, containers: no live bar, so a plain line per step instead of nothing."""
    gateway = _tiny_gateway()
    from agentbolt.algorithms.grpo import GRPO, GRPOConfig

    from .grpo.agents import byte_agent

    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    config = GRPOConfig(max_steps=3, tasks_per_step=2, group_size=2, lora=None, run_dir=str(tmp_path / "run"),
                        checkpoint_every=0)
    trainer = agentbolt.Trainer(algorithm=GRPO(config, console=console), n_runners=1,
                                runner=agentbolt.Runner(concurrency=4), gateway=gateway)
    trainer.fit(byte_agent, [{"prompt": f"p{i}"} for i in range(4)], [{"prompt": "v"}] * 2)
    lines = out.getvalue().splitlines()
    steps = [line for line in lines if line.startswith("GRPO: step ")]
    assert [line.split(" · ")[0] for line in steps] == ["GRPO: step 1/3", "GRPO: step 2/3", "GRPO: step 3/3"]
    assert all("rollouts 4" in line and "reward" in line and line.endswith(" s") for line in steps)
    assert any(line.startswith("GRPO held-out before training: rollouts 2/2") for line in lines)


def test_results_of_empty_runs_render_without_crashing() -> None:
    from agentbolt.algorithms.evaluate import EvaluationResult
    from agentbolt.algorithms.grpo.algorithm import GRPOResult
    from agentbolt.types import RolloutMode

    empty = EvaluationResult(mode=RolloutMode.VAL, threshold=1.0, rows=())
    assert empty.mean_reward is None and empty.success_rate is None
    assert "n/a" in empty.headline() and "0 rollouts" in empty.summary()
    Console(file=io.StringIO()).print(empty)
    assert empty.metrics()["val/scored"] == 0
    assert GRPOResult(steps=0, policy_version=None, run_dir=Path(".")).improvement is None


@pytest.mark.slow
def test_runner_processes_log_a_failure_once_each_and_the_run_stops(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "trainer" / "scripts" / "broken_agent_multiprocess.py"
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], capture_output=True, text=True,
                         timeout=240, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "STOPPED evaluation (val): none of 16 rollouts succeeded" in out.stdout
    assert "ImportError: No module named 'openai'" in out.stdout and "(16 of 16)" in out.stdout
    logged = out.stderr.count("the agent raised ImportError")
    assert 1 <= logged <= 2, out.stderr[-3000:]  # once per runner process, not 16 times
