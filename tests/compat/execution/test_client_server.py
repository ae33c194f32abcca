"""``strategy="cs"`` with each kind of store: v0.3's in-memory store is served by the
trainer's process to the runner processes; a SQLite store by an ``agentbolt server``."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentbolt.compat as agl
from agentbolt.compat.execution import ClientServerExecutionStrategy, strategy_of


@agl.rollout
def grade(task: str, prompt_template: agl.PromptTemplate) -> float:
    return 1.0 if task.startswith("good") else 0.0


def _train(store: object, strategy: object = "cs") -> agl.Baseline:
    baseline = agl.Baseline(n_epochs=1, span_verbosity="none")
    prompt = agl.PromptTemplate(template="Grade {task}", engine="f-string")
    agl.Trainer(algorithm=baseline, n_workers=2, strategy=strategy, store=store,
                initial_resources={"main_prompt": prompt}).fit(grade, ["good-1", "bad-1"], val_dataset=["good-2"])
    return baseline


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_cs_runs_runner_processes_on_each_store(kind: str, tmp_path: Path) -> None:
    store = agl.InMemoryLightningStore() if kind == "memory" else f"sqlite:///{tmp_path / 'run.db'}"
    baseline = _train(store)
    assert sorted(baseline.rewards) == [0.0, 1.0, 1.0]


def test_v03s_strategy_spellings_and_server_options() -> None:
    memory = agl.InMemoryLightningStore().store
    assert isinstance(strategy_of("cs", memory), ClientServerExecutionStrategy)  # served by the trainer
    assert strategy_of("cs", None) == "multiprocess"  # a SQLite store agentbolt's own strategy serves
    configured = strategy_of({"type": "cs", "server_host": "0.0.0.0", "server_port": 9999, "main_process": "runner"})
    assert (configured.server_host, configured.server_port) == ("0.0.0.0", 9999)
    assert strategy_of("shm") == "shm" and strategy_of("inprocess") == "inprocess"


def test_server_options_come_from_v03s_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGL_SERVER_HOST", "0.0.0.0")
    monkeypatch.setenv("AGL_SERVER_PORT", "10000")
    strategy = ClientServerExecutionStrategy()
    assert (strategy.server_host, strategy.server_port) == ("0.0.0.0", 10000)
