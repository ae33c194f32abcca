"""One policy of a :class:`~agentbolt.engines.policies.PolicyEngines` seen as a gateway
of its own, for a trainer of that policy (GRPO with ``agent_match``): its weight updates
pause and drain the whole gateway, and load into that policy only.
"""

from __future__ import annotations

from typing import Any

from agentbolt.engines.engine import Engine
from agentbolt.engines.policies import PolicyEngines
from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.gateway.control import GatewayControl, LocalGatewayControl

__all__ = ["PolicyControl"]


class PolicyControl(GatewayControl):
    """One policy of a :class:`PolicyEngines` seen as a gateway of its own, for a trainer:
    ``engine`` is that policy's engine, ``policy_version()`` its version, and
    ``load_weights`` pauses the whole gateway, drains it and loads the weights into that
    policy only. Wraps the control of a gateway in this process
    (:class:`~agentbolt.gateway.control.LocalGatewayControl`)."""

    def __init__(self, control: GatewayControl, policy: str) -> None:
        engines = control.engine
        if not isinstance(control, LocalGatewayControl) or not isinstance(engines, PolicyEngines):
            raise TypeError("training several policies needs the gateway in this process, serving PolicyEngines: "
                            "Trainer(gateway=Gateway(PolicyEngines.local(model, tokenizer, [...])))")
        engines.engine_of(policy)  # an unknown policy fails here, with the names served
        self.control = control
        self.policy = policy
        self.engines = engines
        self.server_url = control.server_url

    @property
    def engine(self) -> Engine:
        return self.engines.engines[self.policy]

    async def status(self) -> dict[str, Any]:
        return {**await self.control.status(), "policy": self.policy, "policy_version": self.engine.policy_version}

    async def policy_version(self) -> int | None:
        return self.engine.policy_version

    async def flush(self) -> None:
        await self.control.flush()

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None,
                           drain_timeout: float = 120.0) -> int:
        gateway = self.control.gateway
        gateway.pause()
        try:
            await self.control.drain(drain_timeout)
            return await self.engines.load_weights(update, version=version, policy=self.policy)
        finally:
            gateway.resume()

    async def aclose(self) -> None:
        """Nothing to release: the wrapped control belongs to the run."""
