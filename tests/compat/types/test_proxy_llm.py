"""``ProxyLLM.get_base_url(rollout_id, attempt_id)`` routes the endpoint to the attempt, as v0.3."""

from __future__ import annotations

import pytest

import agentbolt
from agentbolt.compat import ProxyLLM


def test_the_endpoint_is_routed_to_the_attempt() -> None:
    llm = ProxyLLM(endpoint="http://proxy:4747/v1", model="m")
    assert llm.get_base_url("ro-1", "at-1") == "http://proxy:4747/rollout/ro-1/attempt/at-1/v1"
    assert ProxyLLM(endpoint="http://proxy:4747/", model="m").get_base_url("r", "a") == (
        "http://proxy:4747/rollout/r/attempt/a")
    assert llm.get_base_url() == "http://proxy:4747/v1"


def test_an_endpoint_already_routed_is_kept() -> None:
    scoped = ProxyLLM(endpoint="http://proxy:4747/rollout/r/attempt/a/v1", model="m")
    assert scoped.get_base_url("r", "a") == "http://proxy:4747/rollout/r/attempt/a/v1"


def test_one_id_without_the_other_is_refused() -> None:
    with pytest.raises(ValueError, match="both rollout_id and attempt_id"):
        ProxyLLM(endpoint="http://p/v1", model="m").get_base_url("r", None)


def test_it_is_an_agentbolt_llm_resource() -> None:
    llm = ProxyLLM(endpoint="http://p/v1", model="m")
    assert isinstance(llm, agentbolt.LLM) and llm.resource_type == "llm"
