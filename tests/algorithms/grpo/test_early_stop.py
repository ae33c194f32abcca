"""GRPO's early stop (``stop_success_rate``): a run ends once the training success rate —
the share of a step's sampled rollouts that succeeded — has been at least the rate for
``stop_success_steps`` steps in a row; it reads the training rollouts only, says so on
the console and in the log, and still evaluates and exports as at any other end."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest

from agentbolt.algorithms.grpo.early_stop import SuccessStreak


def test_the_streak_fires_after_enough_steps_in_a_row_at_the_rate() -> None:
    streak = SuccessStreak(0.9, 3)
    assert [streak.observe(r) for r in (0.95, 1.0, 0.5, 0.9, 0.92, 1.0, 1.0)] == [
        False, False, False, False, False, True, True]


def test_a_step_with_no_scored_rollout_breaks_the_streak_and_no_rate_never_stops() -> None:
    streak = SuccessStreak(0.8, 2)
    assert [streak.observe(r) for r in (0.9, None, 0.9, 0.9)] == [False, False, False, True]
    never = SuccessStreak(None, 1)
    assert not any(never.observe(1.0) for _ in range(5))
    assert "80%" in streak.reason() and "2 steps in a row" in streak.reason()


def test_the_config_declares_the_rule_off_by_default_and_checks_its_range() -> None:
    from pydantic import ValidationError

    from agentbolt.algorithms.grpo import GRPOConfig

    assert GRPOConfig().stop_success_rate is None
    assert GRPOConfig(stop_success_rate=0.9, stop_success_steps=3).stop_success_steps == 3
    for bad in ({"stop_success_rate": 1.5}, {"stop_success_rate": 0.0}, {"stop_success_steps": 0}):
        with pytest.raises(ValidationError):
            GRPOConfig(**bad)


# ---------------------------------------------------------------- through a real run
torch = pytest.importorskip("torch")
pytest.importorskip("peft")

import openai  # noqa: E402
from rich.console import Console  # noqa: E402

import agentbolt  # noqa: E402
from agentbolt.algorithms.grpo import GRPO, GRPOConfig  # noqa: E402
from agentbolt.algorithms.grpo.policies import GRPOPolicies  # noqa: E402
from agentbolt.engines.policies import PolicyEngines  # noqa: E402
from agentbolt.gateway import Gateway, GatewayConfig  # noqa: E402
from agentbolt.metrics import read_jsonl  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.store.memory import MemoryStore  # noqa: E402

TASKS = [{"prompt": "apple 1"}, {"prompt": "river 2"}, {"prompt": "stone 3"}]


async def always_right(task: dict[str, str], llm: agentbolt.LLM) -> float:
    """One model call, then success whatever it said: every step's success rate is 1."""
    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        with agentbolt.agent("solver"):
            await client.chat.completions.create(model=llm.model, messages=[{"role": "user",
                                                                            "content": task["prompt"]}], max_tokens=2)
    return 1.0


@pytest.mark.parametrize("several", [False, True], ids=["GRPO", "GRPOPolicies"])
def test_a_run_stops_once_the_training_success_rate_held_for_the_steps_asked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, several: bool
) -> None:
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engines = PolicyEngines.local(model, tokenizer, ["solver"], default="solver", max_batch_size=16, num_threads=1,
                                  default_max_tokens=2)
    config = GRPOConfig(max_steps=10, tasks_per_step=2, group_size=2, run_dir=str(tmp_path / "run"), progress=False,
                        eval_before=False, eval_after=False, checkpoint_every=0, loggers=["jsonl"],
                        stop_success_rate=1.0, stop_success_steps=2)
    console = Console(file=io.StringIO(), width=200)
    algorithm: Any = (GRPOPolicies({"solver": "^solver$"}, config, console=console) if several
                      else GRPO(config, console=console))
    trainer = agentbolt.Trainer(algorithm=algorithm, store=MemoryStore(), runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engines, GatewayConfig(retry_after=1)))
    with caplog.at_level(logging.INFO, logger="agentbolt.algorithms.grpo"):
        result = trainer.fit(always_right, TASKS)
    if several:
        result = result["solver"]

    assert result.steps == 2 and len(result.history) == 2
    assert "stopping after step 2: training success rate at or above 100% for 2 steps in a row" in caplog.text
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert "GRPO: stopped after 2 steps" in said and "(stop_success_rate)" in said
    rows = [r for r in read_jsonl(tmp_path / "run" / "metrics.jsonl") if "time/train_s" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert 0 < rows[0]["time/train_s"] <= rows[1]["time/train_s"] <= result.train_seconds <= result.seconds
