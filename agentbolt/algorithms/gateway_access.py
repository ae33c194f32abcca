"""How a learning algorithm reaches the gateway whose engine serves its policy.

Three things every algorithm that trains the served model needs, whatever its update:

* :func:`gateway_control` — the :class:`~agentbolt.gateway.control.GatewayControl` the
  execution strategy handed over (``ctx.gateway``: the in-process gateway's, or a
  :class:`~agentbolt.gateway.control.RemoteGateway` to the server's, closed by the
  strategy), or None when the run has no gateway;
* :func:`engine_weights` — a copy of the model the in-process engine serves (and its
  tokenizer), so training starts from exactly the weights rollouts are sampled with;
* :func:`ensure_gateway_llm` — publish ``llm = gateway_llm()`` when no LLM resource
  exists, so agents call the gateway.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.types import LLM

if TYPE_CHECKING:
    from agentbolt.gateway.control import GatewayControl

__all__ = ["engine_weights", "ensure_gateway_llm", "gateway_control"]


def gateway_control(ctx: AlgorithmContext) -> GatewayControl | None:
    """The run's gateway control, or None when the run has no gateway."""
    return ctx.gateway


def engine_weights(control: GatewayControl | None, *, as_base: bool = True) -> tuple[Any, Any] | None:
    """``(model, tokenizer)``: a deep copy of the in-process engine's model (on the
    engine's device; the engine keeps serving its own copy), or None when the engine is
    not in this process or holds no transformers model.

    ``as_base``: the engine also takes the copied weights as the base of the next LoRA
    LoRA. The copy holds any LoRA served now (SFT's, an earlier run's) merged in, and
    the trainer's fresh LoRA is a delta on the copy: without this, the engine would serve
    that delta on the weights from before its first LoRA, dropping the earlier one."""
    engine = control.engine if control is not None else None
    served = engine.local_model() if engine is not None else None
    if engine is None or served is None:  # vLLM, OpenAI: the weights are in another process
        return None
    model = copy.deepcopy(served)
    model.to(engine.device)
    if as_base and engine.supports_rebase:  # only the transformers engine has LoRAs to rebase
        engine.rebase_loras()
    return model, engine.tokenizer


async def ensure_gateway_llm(ctx: AlgorithmContext) -> None:
    """Publish ``llm = gateway_llm()`` when no LLM resource exists, so agents call the gateway."""
    from agentbolt.runner.gateway_llm import gateway_llm

    latest = await ctx.store.get_latest_resources()
    named = dict(latest.resources) if latest is not None else {}
    if any(isinstance(r, LLM) for r in named.values()):
        return
    named["llm"] = gateway_llm()
    await ctx.store.update_resources(named)
