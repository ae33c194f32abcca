"""GRPO sets the gateway up for RL wherever it runs: training calls sampled at
temperature 1 without top-p (the engine's logprobs are those of the untempered
distribution), validation greedy, calls held during a weight swap."""

from __future__ import annotations

import logging

import pytest

from agentbolt.algorithms.grpo import GRPO
from agentbolt.gateway import GatewayConfig
from agentbolt.gateway.spec import EngineSpec, GatewaySpec
from agentbolt.trainer import Trainer


def test_an_empty_config_gets_rl_sampling_and_a_pause_hold() -> None:
    config = GatewayConfig()
    GRPO().configure_gateway(config)
    assert config.sampling == {"train": {"temperature": 1.0, "top_p": 1.0}, "val": {"temperature": 0.0},
                               "test": {"temperature": 0.0}}
    assert config.pause_hold_s == 60.0


def test_the_users_settings_are_kept_and_a_tempered_training_setting_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = GatewayConfig(sampling={"train": {"temperature": 0.7}, "val": {"temperature": 0.2}}, pause_hold_s=5)
    with caplog.at_level(logging.WARNING, logger="agentbolt.algorithms.grpo"):
        GRPO().configure_gateway(config)
    assert config.sampling["train"] == {"temperature": 0.7} and config.sampling["val"] == {"temperature": 0.2}
    assert config.pause_hold_s == 5
    assert "importance ratios assume" in caplog.text


class _Probe(GRPO):
    """GRPO's gateway settings, and a run() that only looks at the gateway it got."""

    async def run(self, ctx):  # type: ignore[override]
        return ctx.gateway.gateway.config


def test_fit_applies_them_to_the_gateway_spec_before_the_gateway_is_built() -> None:
    spec = GatewaySpec(engine=EngineSpec(kind="openai", url="http://127.0.0.1:9/v1"))
    served = Trainer(algorithm=_Probe(), gateway=spec).fit(lambda task: 1.0, [])
    assert served.sampling["train"] == {"temperature": 1.0, "top_p": 1.0}
    assert served.pause_hold_s == 60.0
