"""GRPO sets the gateway up for RL wherever it runs: training calls sampled at
temperature 1 with no filter or penalty (the engine's logprobs are those of the raw
distribution), validation greedy, calls held during a weight swap."""

from __future__ import annotations

import logging

import pytest

from agentbolt.algorithms.grpo import GRPO
from agentbolt.algorithms.grpo.onpolicy import TRAIN_SAMPLING
from agentbolt.engines.spec import EngineSpec
from agentbolt.gateway import GatewayConfig
from agentbolt.gateway.spec import GatewaySpec
from agentbolt.trainer import Trainer


def test_an_empty_config_gets_rl_sampling_and_a_pause_hold() -> None:
    config = GatewayConfig()
    GRPO().configure_gateway(config)
    assert config.sampling["train"] == TRAIN_SAMPLING
    assert config.sampling["train"]["temperature"] == 1.0 and config.sampling["train"]["top_p"] == 1.0
    assert {k for k, v in config.sampling["train"].items() if v is None} >= {
        "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias"}
    assert config.sampling["val"] == {"temperature": 0.0} and config.sampling["test"] == {"temperature": 0.0}
    assert config.pause_hold_s == 60.0


def test_a_tempered_training_setting_is_overridden_and_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    config = GatewayConfig(sampling={"train": {"temperature": 0.7, "max_tokens": 64}, "val": {"temperature": 0.2}},
                           pause_hold_s=5)
    with caplog.at_level(logging.WARNING, logger="agentbolt.algorithms.grpo"):
        GRPO().configure_gateway(config)
    assert config.sampling["train"] == {**TRAIN_SAMPLING, "max_tokens": 64}  # forced, the rest kept
    assert config.sampling["val"] == {"temperature": 0.2}
    assert config.pause_hold_s == 5
    assert "GRPO overrides {'temperature': 0.7}" in caplog.text


class _Probe(GRPO):
    """GRPO's gateway settings, and a run() that only looks at the gateway it got."""

    async def run(self, ctx):  # type: ignore[override]
        return ctx.gateway.gateway.config


def test_fit_applies_them_to_the_gateway_spec_before_the_gateway_is_built() -> None:
    spec = GatewaySpec(engine=EngineSpec(kind="openai", url="http://127.0.0.1:9/v1"))
    served = Trainer(algorithm=_Probe(), gateway=spec).fit(lambda task: 1.0, [])
    assert served.sampling["train"] == TRAIN_SAMPLING
    assert served.pause_hold_s == 60.0
