"""SFT numbers the weights it publishes as GRPO does (:class:`agentbolt.training.sync.PolicySync`):
a version names one set of weights for good, so no SFT run hands a number out twice — not a
fresh run in an old ``run_dir``, not a run resumed after weights published past its
checkpoint were lost."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import agentbolt
from agentbolt.algorithms import SFT, SFTConfig, SFTResult
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import tiny_model
from agentbolt.training.versions import PublishedVersions
from tests.algorithms.sft.agents import exact_agent, record, tasks


def run_sft(run_dir: Path, *, resume: bool) -> SFTResult:
    """One SFT iteration on records, against a fresh engine (which serves version 0)."""
    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=32, n_layers=1)
    engine = TransformersEngine(model, tokenizer, max_batch_size=8, num_threads=1, default_max_tokens=4)
    config = SFTConfig(epochs=1, batch_size=4, lora=None, run_dir=str(run_dir), progress=False, resume=resume,
                       eval_before=False, eval_after=False)
    train = tasks(4, seed=1)
    sft = SFT(config, records=[record(t) for t in train])
    trainer = agentbolt.Trainer(algorithm=sft, n_runners=1, runner=agentbolt.Runner(concurrency=4),
                                gateway=Gateway(engine, GatewayConfig(retry_after=1)))
    return trainer.fit(exact_agent, train, tasks(2, seed=2))


def test_a_fresh_sft_run_in_an_old_run_dir_publishes_above_every_version_it_published(tmp_path: Path) -> None:
    first = run_sft(tmp_path / "run", resume=False)
    second = run_sft(tmp_path / "run", resume=False)  # its engine serves version 0 again
    assert first.policy_version == 1
    assert second.policy_version == 2
    assert PublishedVersions(tmp_path / "run").read() == 2


def test_a_resumed_sft_run_republishes_above_versions_lost_after_its_checkpoint(tmp_path: Path) -> None:
    first = run_sft(tmp_path / "run", resume=False)
    PublishedVersions(tmp_path / "run").note(5)  # published after the checkpoint, lost in a crash
    resumed = run_sft(tmp_path / "run", resume=True)
    assert first.policy_version == 1 and first.iterations == resumed.iterations == 1
    assert resumed.policy_version == 6
    assert PublishedVersions(tmp_path / "run").read() == 6
