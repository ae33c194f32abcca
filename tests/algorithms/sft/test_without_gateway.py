"""SFT without a gateway (records only), and the errors that say what is missing."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

import agentbolt
from agentbolt.algorithms import SFT, LoraSettings, SFTConfig
from agentbolt.training.publish import NoGatewayError
from agentbolt.algorithms.sft import NoTrainingDataError
from agentbolt.models import tiny_model
from tests.algorithms.sft.agents import exact_agent, record, tasks


def config(tmp_path: Path, **kw: object) -> SFTConfig:
    return SFTConfig.model_validate({"epochs": 1, "run_dir": str(tmp_path / "run"), "progress": False, **kw})


def test_records_only_train_and_export_a_lora_model_and_say_nothing_was_published(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model, tok = tiny_model(seed=0, vocab="bytes", hidden=32, n_layers=1)
    sft = SFT(config(tmp_path, lora=LoraSettings(r=4, alpha=8)), model=model, tokenizer=tok,
              records=[record(t) for t in tasks(4, seed=0)])
    with caplog.at_level(logging.INFO, logger="agentbolt.algorithms.sft"):
        result = agentbolt.Trainer(algorithm=sft).fit(exact_agent, tasks(4, seed=0), tasks(2, seed=1))
    assert "publishes nothing and does not evaluate" in caplog.text
    assert result.before is None and result.after is None and result.policy_version is None
    assert result.n_records == [4] and (tmp_path / "run" / "model" / "config.json").is_file()
    assert 0 < result.train_seconds <= result.seconds  # the iterations' time, counted by the run skeleton
    assert not any("lora" in p.name for p in (tmp_path / "run" / "model").iterdir())  # merged: a plain HF model


def test_sampling_needs_a_gateway(tmp_path: Path) -> None:
    model, tok = tiny_model(seed=0, vocab="bytes", hidden=32, n_layers=1)
    sft = SFT(config(tmp_path, iterations=2, lora=None), model=model, tokenizer=tok,
              records=[record(t) for t in tasks(2, seed=0)])
    with pytest.raises(NoGatewayError, match="iteration 2 samples rollouts from the policy"):
        agentbolt.Trainer(algorithm=sft).fit(exact_agent, tasks(2, seed=0))


def test_no_data_is_a_clear_error(tmp_path: Path) -> None:
    model, tok = tiny_model(seed=0, vocab="bytes", hidden=32, n_layers=1)
    context_only = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 0}]}
    sft = SFT(config(tmp_path, lora=None), model=model, tokenizer=tok, records=[context_only])
    with pytest.raises(NoTrainingDataError, match="1 with no assistant message to train"):
        agentbolt.Trainer(algorithm=sft).fit(exact_agent, tasks(2, seed=0))


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use 'store'"):
        SFT(rollouts="all")
    with pytest.raises(ValueError, match="selects nothing"):
        SFT(min_reward=None)
    model, _ = tiny_model(seed=0, vocab="bytes", hidden=32, n_layers=1)
    sft = SFT(config(tmp_path, lora=None), model=model, records=[record(t) for t in tasks(2, seed=0)])
    with pytest.raises(ValueError, match="has no tokenizer"):
        agentbolt.Trainer(algorithm=sft).fit(exact_agent, tasks(2, seed=0))


def test_a_second_run_resumes_after_the_last_finished_iteration(tmp_path: Path) -> None:
    import torch

    records = [record(t) for t in tasks(4, seed=0)]
    model, tok = tiny_model(seed=0, vocab="bytes", hidden=32, n_layers=1)
    first = agentbolt.Trainer(algorithm=SFT(config(tmp_path, lora=None, learning_rate=1e-2), model=model,
                                            tokenizer=tok, records=records)).fit(exact_agent, tasks(4, seed=0))
    trained = {k: v.clone() for k, v in model.state_dict().items()}

    fresh, tok = tiny_model(seed=0, vocab="bytes", hidden=32, n_layers=1)
    again = agentbolt.Trainer(algorithm=SFT(config(tmp_path, lora=None, learning_rate=1e-2), model=fresh,
                                            tokenizer=tok, records=records)).fit(exact_agent, tasks(4, seed=0))
    assert first.n_records == again.n_records == [4] and again.iterations == 1 and again.history == []
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in trained.items())  # the checkpoint, not retrained
