"""The runtime LoRA every replica of an HTTP engine serves, replaced on all of them together.

vLLM and SGLang load LoRAs at runtime from a directory they can read, each replica on its
own. :class:`ServedLora` keeps them in step: a new LoRA is loaded on every replica under a
name of its own (``<prefix>-v<version>``), and only then served (the old one unloaded);
a replica that refuses it undoes the load on the others (the old LoRA stays served
everywhere); a replica that cannot be reached is skipped and marked stale: it takes no
calls (503, which takes it out of the gateway's placement) until the engine's probe has
loaded the LoRA there and calls :meth:`ServedLora.restored`.

What differs between servers — the routes and their answers — is the engine's, behind the
small :class:`LoraRoutes` seam.
"""

from __future__ import annotations

import logging
from typing import Protocol

from agentbolt.engines.engine import EngineError
from agentbolt.engines.weight_update import WeightUpdate

__all__ = ["LoraRoutes", "ServedLora", "lora_directory"]

logger = logging.getLogger("agentbolt.gateway")


class LoraRoutes(Protocol):
    """A model server's runtime-LoRA routes, per replica (an HTTP engine offers them)."""

    @property
    def n_replicas(self) -> int: ...

    def where(self, replica: int) -> str:
        """The replica's URL, for messages."""
        ...

    async def load_lora(self, replica: int, name: str, path: str) -> None:
        """Load the LoRA at ``path`` as ``name``; raises EngineError (``replica_down`` when unreachable)."""
        ...

    async def unload_lora(self, replica: int, name: str) -> None:
        """Unload ``name``; raises EngineError."""
        ...


class ServedLora:
    """Which LoRA the replicas behind ``routes`` serve (``name``, read from ``path``), and
    which replicas missed its load (``stale``). ``server`` names the server in messages."""

    def __init__(self, routes: LoraRoutes, prefix: str, server: str) -> None:
        self.routes = routes
        self.prefix = prefix
        self.server = server
        self.name: str | None = None
        self.path: str | None = None
        self.stale: set[int] = set()
        self._loads = 0

    async def load(self, path: str, version: int) -> list[int]:
        """Load the LoRA at ``path`` on every replica as the one served for ``version``;
        returns the replicas that loaded it. Raises the refusal of a replica that refused
        it (after unloading it from the others), or an unreachable replica's error when
        none could be reached."""
        self._loads += 1
        name = f"{self.prefix}-v{version}"
        if name == self.name:  # the same version again: a server refuses a name it already has
            name = f"{name}.{self._loads}"
        loaded: list[int] = []
        missed: list[tuple[int, EngineError]] = []
        try:
            for replica in range(self.routes.n_replicas):
                try:
                    await self.routes.load_lora(replica, name, path)
                except EngineError as err:
                    if not err.replica_down:
                        raise
                    missed.append((replica, err))
                    continue
                loaded.append(replica)
            if not loaded:
                raise missed[0][1]
        except BaseException:
            for replica in loaded:  # the reachable replicas serve the same weights, or none changes
                await self._unload(replica, name)
            raise
        for replica, missed_err in missed:
            logger.warning("%s replica %s missed LoRA %r (%s): it takes no calls until it answers again",
                           self.server, self.routes.where(replica), name, missed_err.message)
        old, self.name, self.path = self.name, name, path
        self.stale = {r for r, _ in missed}
        if old is not None:
            for replica in loaded:
                await self._unload(replica, old)
        return loaded

    def check_current(self, replica: int) -> None:
        """Refuse a replica that missed the last load: it serves old weights (503: the
        gateway takes it out, and the engine's probe loads the LoRA there)."""
        i = replica % self.routes.n_replicas
        if i in self.stale:
            raise EngineError(503, f"the {self.server} server at {self.routes.where(i)} missed the load of LoRA "
                                   f"{self.name!r} (it was unreachable): it takes no calls until a probe loads it")

    def restored(self, replica: int) -> None:
        """The engine's probe found ``replica`` serving the LoRA served now."""
        self.stale.discard(replica % self.routes.n_replicas)

    async def _unload(self, replica: int, name: str) -> None:
        try:
            await self.routes.unload_lora(replica, name)
        except EngineError as exc:  # a leftover LoRA costs memory, not correctness
            logger.warning("could not unload LoRA %r from %s: %s", name, self.routes.where(replica), exc.message)


def lora_directory(update: WeightUpdate, engine: str, server: str, full_sync: str = "") -> str:
    """The LoRA directory ``update`` names, for an ``engine`` whose ``server`` loads LoRAs
    from disk only (``full_sync``: how full weights would go there, for the message):
    tensors raise EngineError(501), no directory ValueError."""
    if update.state_dict is not None or update.lora is not None:
        raise EngineError(
            501,
            f"the {engine} engine loads LoRAs from a directory {server} can read: save the LoRA with "
            "peft_model.save_pretrained(<shared path>) and pass lora_path=<shared path>; sending tensors "
            f"(state_dict=/lora=) and full-weight sync to {server}{f' ({full_sync})' if full_sync else ''} are not "
            "implemented",
        )
    if not update.lora_path:
        raise ValueError(f"the {engine} engine's update_weights needs lora_path=<a peft LoRA directory {server} can "
                         "read>")
    return str(update.lora_path)
