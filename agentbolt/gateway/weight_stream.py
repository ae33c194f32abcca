"""An update in parts: new weights sent to the engine one group at a time, served at once.

A trainer that holds its policy sharded (FSDP2) gathers the whole weights one group at a
time (a transformer block, then the next); holding them all on one rank to send them in
one :meth:`~agentbolt.gateway.control.GatewayControl.load_weights` would put a second
whole copy of the model on it. A :class:`WeightStream` takes them part by part instead:

1. **open** — the gateway pauses (new calls are held, then turned away with 429) and
   drains: from here until the stream closes, no call runs;
2. **send** each part — a partial ``state_dict``, copied into the served weights in place
   (:meth:`~agentbolt.engines.engine.Engine.load_weight_part`); ``policy_version`` stays;
3. **commit** — the engine serves the new weights under the new version
   (:meth:`~agentbolt.engines.engine.Engine.commit_weights`), the gateway resumes.

So every call is answered on the old weights or on the new ones, never on a mix.
**abort** (a part refused, the trainer failing between two parts) resumes the gateway
too: when no part was loaded the engine serves its old weights as before; when some were,
its weights are partly new and it **answers no call** (503,
:attr:`~agentbolt.engines.engine.Engine.incomplete_weights`) until an update completes —
a failed publish is loud rather than served (a resumed training run republishes first).

:class:`LocalWeightStream` is the stream of a gateway in this process; the server's
routes (``/v1/gateway/weights/streams``, :mod:`agentbolt.server.routes.gateway_weight_streams`)
hold one for a trainer elsewhere (:class:`~agentbolt.gateway.control.RemoteWeightStream`).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.weight_update import WeightUpdate

if TYPE_CHECKING:
    from agentbolt.gateway.gateway import Gateway

__all__ = ["LocalWeightStream", "WeightStream"]

log = logging.getLogger("agentbolt.gateway")


class WeightStream(abc.ABC):
    """One update in parts (see the module doc): :meth:`send` each part, then
    :meth:`commit`, or :meth:`abort`. ``parts``: how many were loaded."""

    def __init__(self) -> None:
        self.parts = 0
        self.closed = False

    @abc.abstractmethod
    async def send(self, state_dict: Mapping[str, Any]) -> None:
        """Load one part (a partial state dict of the served architecture). ValueError for a
        part the engine refuses (it changes nothing)."""

    @abc.abstractmethod
    async def commit(self, version: int | None = None) -> int:
        """Serve the loaded weights as ``version`` (default: the current one + 1), resume the
        gateway; return the version now served."""

    @abc.abstractmethod
    async def abort(self) -> None:
        """Give up: resume the gateway (see the module doc for what the engine serves then).
        Idempotent; nothing happens after :meth:`commit`."""

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this update in parts is closed (committed or aborted): open another")


class LocalWeightStream(WeightStream):
    """The update in parts of a :class:`~agentbolt.gateway.Gateway` in this process, into
    ``engine`` (the gateway's, or one policy's of it). Made by :meth:`open`."""

    def __init__(self, gateway: Gateway, engine: Engine) -> None:
        super().__init__()
        self.gateway = gateway
        self.engine = engine

    @classmethod
    async def open(cls, gateway: Gateway, engine: Engine, drain: Callable[[float], Awaitable[None]],
                   drain_timeout: float) -> LocalWeightStream:
        """Pause ``gateway`` and ``drain`` it (TimeoutError after ``drain_timeout`` s: the
        gateway is resumed, nothing is loaded); EngineError(501) for an engine that cannot
        take an update in parts, before any call is held."""
        if not engine.supports_weight_streams:
            raise EngineError(501, f"the {engine.name} engine cannot load an update in parts: a sharded policy's "
                                   "full weights can only be published to the transformers engine")
        gateway.pause()
        try:
            await drain(drain_timeout)
        except BaseException:
            gateway.resume()
            raise
        return cls(gateway, engine)

    async def send(self, state_dict: Mapping[str, Any]) -> None:
        self._check_open()
        await self.engine.load_weight_part(WeightUpdate(state_dict))
        self.parts += 1

    async def commit(self, version: int | None = None) -> int:
        self._check_open()
        try:
            return await self.engine.commit_weights(version=version)
        finally:
            self._close()

    async def abort(self) -> None:
        if self.closed:
            return
        self._close()
        if self.engine.incomplete_weights:
            log.error("an update in parts was abandoned after %d parts: the %s engine's weights are partly new, so it "
                      "answers no call until an update completes (publish the weights again)", self.parts,
                      self.engine.name)

    def _close(self) -> None:
        self.closed = True
        self.gateway.resume()
