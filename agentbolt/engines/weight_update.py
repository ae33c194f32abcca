"""``WeightUpdate``: the one value a weight update is, from the trainer to the engine.

A trainer's policy says what it hands over (:meth:`agentbolt.training.policy.Policy.weight_update`);
the trainer's publisher gives it to a :class:`~agentbolt.gateway.control.GatewayControl`
(``load_weights``), which pauses and drains the gateway and gives the same value to the
engine (:meth:`agentbolt.engines.engine.Engine.load_weights`) — or, for a gateway in a
server, sends it over ``POST /v1/gateway/weights``, where the server rebuilds it. Which
fields are set is the format: engines say which they take (``Engine.weight_formats``).

* ``state_dict`` — full or partial weights of the served architecture (tensors);
* ``lora`` — a LoRA: a peft ``PeftModel`` (its active LoRA and scale are read),
  or a LoRA state dict as ``peft.get_peft_model_state_dict`` returns it, with
  ``lora_scale`` = alpha / r;
* ``lora_path`` — a peft LoRA directory the engine can read (``save_pretrained``'s
  files; the scale is in its config): how vLLM takes LoRAs.

The value only carries the weights; each engine checks what it can load and says what to
do otherwise. A sharded trainer's full weights come as several such values (partial
``state_dict`` s) of one update in parts, served together at its commit
(:mod:`agentbolt.gateway.weight_stream`).

The keyword spelling ``update_weights(state_dict=..., lora=..., lora_scale=...,
lora_path=...)`` of engines and controls builds one of these and loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["WeightUpdate"]


@dataclass(frozen=True, slots=True)
class WeightUpdate:
    """New weights for the engine: tensors (``state_dict`` and/or ``lora``) or a LoRA
    directory (``lora_path``). See the module docstring for each field."""

    state_dict: Mapping[str, Any] | None = None
    lora: Any = None
    lora_scale: float | None = None
    lora_path: str | None = None

    @property
    def formats(self) -> tuple[str, ...]:
        """The formats this update is in (``state_dict``, ``lora``, ``lora_path``), as
        ``Engine.weight_formats`` names them."""
        given = {"state_dict": self.state_dict, "lora": self.lora, "lora_path": self.lora_path}
        return tuple(name for name, value in given.items() if value is not None)

    def keywords(self) -> dict[str, Any]:
        """The fields that are set, as the keyword arguments of ``update_weights``."""
        given = {"state_dict": self.state_dict, "lora": self.lora, "lora_scale": self.lora_scale,
                 "lora_path": self.lora_path}
        return {k: v for k, v in given.items() if v is not None}
