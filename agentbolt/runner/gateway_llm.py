"""An ``LLM`` resource that means "this rollout's gateway URL".

A Python agent trained with RL must send its model calls through the gateway, under
its rollout's URL, so the calls are recorded with token ids. Publish
``gateway_llm()`` as the ``llm`` resource; for every attempt the runner hands the agent
a copy whose ``endpoint`` is ``<server>/rollout/<id>/attempt/<id>/v1`` and whose
``api_key`` is the attempt's scoped token. The agent just uses ``llm.endpoint`` and
``llm.api_key`` with any OpenAI client.
"""

from __future__ import annotations

from typing import Any

from agentbolt.scoped import NO_TOKEN, rollout_base_url
from agentbolt.store.capabilities import ServerBacked
from agentbolt.types import LLM, Resources

__all__ = ["GATEWAY_ENDPOINT", "GatewayUnavailableError", "gateway_llm", "resolve_gateway_llms"]

GATEWAY_ENDPOINT = "agentbolt:gateway"
"""``LLM.endpoint`` value the runner replaces with the attempt's gateway base URL."""


class GatewayUnavailableError(RuntimeError):
    """A rollout asks for the gateway but its runner does not talk to a server."""


def gateway_llm(model: str = "policy", **sampling_parameters: Any) -> LLM:
    """An LLM resource that points each attempt at its own gateway URL."""
    return LLM(endpoint=GATEWAY_ENDPOINT, model=model, sampling_parameters=sampling_parameters)


def resolve_gateway_llms(resources: Resources | None, store: Any, rollout_id: str, attempt_id: str,
                         token: str | None) -> Resources | None:
    """``resources`` with every gateway LLM pointed at this attempt's URL (others unchanged)."""
    if resources is None or not any(isinstance(r, LLM) and r.endpoint == GATEWAY_ENDPOINT
                                    for r in resources.resources.values()):
        return resources
    if not isinstance(store, ServerBacked):
        raise GatewayUnavailableError(
            f"the LLM resource points at the gateway ({GATEWAY_ENDPOINT!r}) but this runner's store is a "
            f"{type(store).__name__}, not a server: give the trainer an engine (Trainer(gateway=EngineSpec(...))) "
            "or run the runner against the server (`agentbolt runner --server URL`)"
        )
    url = rollout_base_url(store.base_url, rollout_id, attempt_id)
    key = token or store.token or NO_TOKEN
    named = {
        name: r.model_copy(update={"endpoint": url, "api_key": key})
        if isinstance(r, LLM) and r.endpoint == GATEWAY_ENDPOINT else r
        for name, r in resources.resources.items()
    }
    return resources.model_copy(update={"resources": named})
