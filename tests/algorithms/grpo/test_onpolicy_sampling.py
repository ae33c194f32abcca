"""Training calls are sampled exactly as the importance ratio assumes: the gateway GRPO
set up forces temperature/top-p to 1 and strips every other field that reshapes the
distribution (whatever the agent sends); a rollout sampled otherwise — by a gateway
started by hand with other settings — is refused when its samples are built."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gateway.conftest import ADMIN, GatewayWorld
from gateway.fakes import FakeEngine

from agentbolt.adapters.attempts import parse_attempts
from agentbolt.adapters.samples import SampleAdapter
from agentbolt.algorithms.grpo import GRPO
from agentbolt.algorithms.grpo.collect import rollout_samples
from agentbolt.algorithms.grpo.onpolicy import (
    OffPolicySamplingError,
    off_policy_calls,
    sampling_mismatch,
)
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Span

AGENT_SAMPLING = {"temperature": 0.3, "top_p": 0.5, "top_k": 20, "min_p": 0.05, "presence_penalty": 0.5,
                  "frequency_penalty": 0.4, "repetition_penalty": 1.2, "logit_bias": {"42": 5}, "min_tokens": 2,
                  "response_format": {"type": "json_object"}, "guided_regex": "[0-9]+"}


def _world(config: GatewayConfig) -> Iterator[GatewayWorld]:
    engine = FakeEngine()
    gateway = Gateway(engine, config)
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        world = GatewayWorld(url, engine, gateway)
        try:
            yield world
        finally:
            world.admin.close()


@pytest.fixture
def grpo_world() -> Iterator[GatewayWorld]:
    config = GatewayConfig(retry_backoff=0.01)
    GRPO().configure_gateway(config)
    yield from _world(config)


@pytest.fixture
def hand_started_world() -> Iterator[GatewayWorld]:
    """A server someone started with ``--train-temperature 0.7`` and nothing else."""
    yield from _world(GatewayConfig(sampling={"train": {"temperature": 0.7}}, retry_backoff=0.01))


def _train_call(world: GatewayWorld) -> tuple[str, list[Span]]:
    attempt = world.claim("train")
    with world.client(attempt) as client:
        client.post("/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                               **AGENT_SAMPLING}).raise_for_status()
    return attempt.rollout_id, [Span.model_validate(s) for s in world.spans(attempt.rollout_id, 1)]


async def test_the_agents_sampling_fields_never_reach_the_engine_on_a_training_call(grpo_world: GatewayWorld) -> None:
    rollout_id, spans = _train_call(grpo_world)
    sent = grpo_world.engine.calls[-1][0]  # type: ignore[attr-defined]
    assert sent["temperature"] == 1.0 and sent["top_p"] == 1.0
    assert not {"top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias",
                "min_tokens", "response_format", "guided_regex"} & set(sent)  # constrained decoding: stripped too
    assert sampling_mismatch(sent) == {}
    assert off_policy_calls(spans) == {}  # the span records what was sent
    found = rollout_samples(rollout_id, parse_attempts(spans), SampleAdapter())
    assert found is not None and found.samples


async def test_a_rollout_sampled_otherwise_is_refused_with_what_to_do(hand_started_world: GatewayWorld) -> None:
    rollout_id, spans = _train_call(hand_started_world)
    mismatched = off_policy_calls(spans)
    assert list(mismatched.values()) == [{k: v for k, v in AGENT_SAMPLING.items() if k != "temperature"}
                                         | {"temperature": 0.7}]
    with pytest.raises(OffPolicySamplingError, match="temperature=0.7") as err:
        rollout_samples(rollout_id, parse_attempts(spans), SampleAdapter())
    assert "top_k=20" in str(err.value) and "logit_bias" in str(err.value)
    assert "response_format={'type': 'json_object'}" in str(err.value)


def test_neutral_values_are_not_a_mismatch() -> None:
    neutral = {"temperature": 1, "top_p": 1.0, "top_k": -1, "min_p": 0, "presence_penalty": 0.0, "logit_bias": {},
               "repetition_penalty": 1.0, "min_tokens": 0, "best_of": 1, "max_tokens": 5, "seed": 3, "stop": ["\n"],
               "response_format": {"type": "text"}}
    assert sampling_mismatch(neutral) == {}
    assert sampling_mismatch({"top_k": 0, "best_of": 3}) == {"best_of": 3}
