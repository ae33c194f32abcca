"""Publishing a policy sharded over the ranks (FSDP2) without a second whole copy on rank 0.

Rank 0 talks to the engine, but no rank holds the whole policy: every read is a gather
that all ranks make (:mod:`.ranks` announces it). So the :class:`~.publish.Publisher`
sends a sharded policy

* **full weights** as an update in parts (:func:`stream_parts`,
  :meth:`~agentbolt.gateway.control.GatewayControl.load_weight_stream`): one FSDP group
  gathered, sent and dropped before the next is gathered — rank 0 holds one transformer
  block's weights more, not a model's; the engine serves the new version after the last;
* its **base weights** (to an engine in 16 bits, at the start) the same way, in parts of
  about :data:`BASE_PART_BYTES` in the engine's dtype (:func:`base_parts`);
* a **LoRA** gathered whole (it is small): as tensors, or written as a peft LoRA directory
  for an engine that reads them from disk (:func:`write_lora`; vLLM).
"""

from __future__ import annotations

import asyncio
import collections
import copy
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.training import distributed as dist

if TYPE_CHECKING:
    from agentbolt.gateway.control import GatewayControl

__all__ = ["BASE_PART_BYTES", "base_parts", "state_dicts", "stream_parts", "write_lora"]

BASE_PART_BYTES = 256 * 2**20
"""About how many bytes of base weights one part holds (:func:`base_parts`)."""


async def stream_parts(control: GatewayControl, parts: Iterator[Mapping[str, Any]], version: int | None) -> int:
    """Send ``parts`` (each gathered off the event loop, one at a time) as one update in
    parts served as ``version``; the version served. Whatever the engine does with them,
    every part is gathered: the other ranks gather them all, and a rank 0 that stopped half
    way would leave them waiting (the engine's error is raised after)."""

    async def each() -> AsyncIterator[Mapping[str, Any]]:
        while (part := await asyncio.to_thread(next, parts, None)) is not None:
            yield part
            del part

    try:
        return await control.load_weight_stream(each(), version=version)
    finally:
        await asyncio.to_thread(collections.deque, parts, 0)


def state_dicts(updates: Iterator[WeightUpdate]) -> Iterator[dict[str, Any]]:
    """The state dicts of ``updates``, holding none once the next is asked for (a
    generator expression would keep the last update until the next is gathered)."""
    for update in updates:
        state = dict(update.state_dict or {})
        del update
        yield state
        del state


def base_parts(named: Iterator[tuple[str, Any]], dtype: Any) -> Iterator[dict[str, Any]]:
    """``named`` weights as CPU copies in ``dtype``, in parts of about :data:`BASE_PART_BYTES`
    (rank 0; the other ranks' parts are empty). Every weight is read, on every rank."""
    part: dict[str, Any] = {}
    size = 0
    for name, weight in named:
        if dist.is_main():
            part[name] = weight.detach().to("cpu", dtype, copy=True)
            size += part[name].numel() * part[name].element_size()
        if size >= BASE_PART_BYTES:
            yield part
            part, size = {}, 0
    yield part


def write_lora(directory: Path, model: Any, lora: Mapping[str, Any]) -> None:
    """A peft LoRA directory (``adapter_config.json``, ``adapter_model.safetensors``: what
    ``save_pretrained`` writes) from ``model``'s LoRA config and its gathered ``lora``
    (as ``peft.get_peft_model_state_dict`` names it)."""
    from safetensors.torch import save_file

    config = copy.copy(model.peft_config["default"])
    config.inference_mode = True
    config.save_pretrained(str(directory))
    save_file({k: v.contiguous() for k, v in lora.items()}, str(directory / "adapter_model.safetensors"))
