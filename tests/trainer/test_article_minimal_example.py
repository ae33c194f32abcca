"""The Agent Lightning article's minimal example runs as written: a plain function
agent that emits its reward and returns its answer, in ``Runner(run_fn=...)``, with
hooks and the training data given to the ``Trainer``, started with ``trainer.run()``.
The answer is the rollout's output — stored, shown by ``agentbolt store rollout``, by
the evaluation table and by ``Trainer.dev`` — not a failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import agentbolt
from agentbolt.algorithms import Evaluate
from agentbolt.cli import app
from agentbolt.types import RolloutStatus

CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Peru", "Lima"), ("Kenya", "Nairobi")]


def capital_agent(task: dict[str, str]) -> str:
    """The article's shape: do the work, grade it, ``emit_reward(score)``, ``return result``."""
    result = dict(CAPITALS).get(task["country"], "unknown")
    score = 1.0 if result == task["expected"] else 0.0
    agentbolt.emit_reward(score)
    return result


class CountingHooks(agentbolt.Hooks):
    def __init__(self) -> None:
        self.ended: list[str] = []

    def on_rollout_end(self, rollout: Any, spans: Any) -> None:
        self.ended.append(rollout.rollout_id)


def test_the_article_minimal_example_runs_and_keeps_the_answer(tmp_path: Path) -> None:
    hooks = CountingHooks()
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    trainer = agentbolt.Trainer(
        algorithm=Evaluate(show=False, progress=False),
        runner=agentbolt.Runner(run_fn=capital_agent),
        hooks=hooks,
        train_dataset=[{"country": c, "expected": a} for c, a in CAPITALS],
        store=store_url,
    )
    result = trainer.run()

    assert [row.status for row in result.rows] == [RolloutStatus.SUCCEEDED] * 4
    assert [row.output for row in result.rows] == ["Paris", "Tokyo", "Lima", "Nairobi"]
    assert result.success_rate == 1.0 and len(hooks.ended) == 4
    assert "output" in [c.header for c in result.table().columns]

    shown = CliRunner().invoke(app, ["store", "rollout", result.rows[0].rollout_id, "--store", store_url, "--json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    assert doc["attempts"][-1]["metadata"]["output"] == "Paris"
    text = CliRunner().invoke(app, ["store", "rollout", result.rows[1].rollout_id, "--store", store_url])
    assert "output" in text.output and "Tokyo" in text.output


def test_trainer_dev_shows_the_output() -> None:
    (dev,) = agentbolt.Trainer().dev(capital_agent, [{"country": "Peru", "expected": "Lima"}], n=1)
    assert dev.rollout.status == RolloutStatus.SUCCEEDED and dev.output == "Lima"
