"""Gateways described as data: which engine, with what settings — built where they run.

A :class:`Gateway` holds open connections or a loaded model, so it cannot be sent to
another process. A :class:`GatewaySpec` can (it is plain pydantic data): the trainer
hands one to the server process it starts, and ``agentbolt server --engine ...`` makes
one from its options. ``spec.build()`` then makes the engine and the gateway there.

::

    spec = GatewaySpec(
        engine=EngineSpec(kind="vllm", url="http://127.0.0.1:8000/v1", model="Qwen/Qwen2.5-1.5B-Instruct"),
        config=GatewayConfig(sampling={"train": {"temperature": 1.0}, "val": {"temperature": 0.0}}),
    )
    Trainer(..., strategy="multiprocess", gateway=spec)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from agentbolt.engines.spec import EngineSpec
from agentbolt.gateway.config import GatewayConfig

if TYPE_CHECKING:
    from agentbolt.gateway.gateway import Gateway

__all__ = ["GatewaySpec", "as_gateway_spec"]


class GatewaySpec(BaseModel):
    """A gateway to build where it runs: an engine and the gateway's settings."""

    model_config = ConfigDict(extra="forbid")

    engine: EngineSpec
    config: GatewayConfig = Field(default_factory=GatewayConfig)

    def build(self) -> Gateway:
        """Make the engine and the gateway in front of it (mount it with ``create_app``)."""
        from agentbolt.gateway.gateway import Gateway

        return Gateway(self.engine.build(), self.config.model_copy(deep=True))


def as_gateway_spec(value: GatewaySpec | EngineSpec) -> GatewaySpec:
    """A :class:`GatewaySpec` from either spec (an engine alone gets the default settings)."""
    if isinstance(value, GatewaySpec):
        return value
    if isinstance(value, EngineSpec):
        return GatewaySpec(engine=value)
    raise TypeError(
        f"expected a GatewaySpec or an EngineSpec, got {type(value).__name__}: describe the engine, e.g. "
        "EngineSpec(kind='vllm', url='http://127.0.0.1:8000/v1')"
    )
