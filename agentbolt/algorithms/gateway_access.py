"""How a learning algorithm reaches the gateway whose engine serves its policy.

Three things every algorithm that trains the served model needs, whatever its update:

* :func:`gateway_control` — the :class:`~agentbolt.gateway.control.GatewayControl` of the
  run: the trainer's in-process gateway (``ctx.gateway``), or the gateway of the server
  behind an :class:`~agentbolt.store.http.HttpStore` (a :class:`RemoteGateway`, which the
  caller must ``aclose()``), or None when the run has no gateway;
* :func:`engine_weights` — a copy of the model the in-process engine serves (and its
  tokenizer), so training starts from exactly the weights rollouts are sampled with;
* :func:`ensure_gateway_llm` — publish ``llm = gateway_llm()`` when no LLM resource
  exists, so agents call the gateway.
"""

from __future__ import annotations

import copy
from typing import Any

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.types import LLM

__all__ = ["engine_weights", "ensure_gateway_llm", "gateway_control", "owns_control"]


def gateway_control(ctx: AlgorithmContext) -> Any:
    """The run's gateway control, or None when the run has no gateway."""
    control = getattr(ctx, "gateway", None)
    if control is not None:
        return control
    from agentbolt.store.http import HttpStore

    if isinstance(ctx.store, HttpStore):
        from agentbolt.gateway.control import RemoteGateway

        return RemoteGateway(ctx.store.base_url, token=ctx.store.token)
    return None


def owns_control(ctx: AlgorithmContext, control: Any) -> bool:
    """Whether ``control`` was made by :func:`gateway_control` (and must be closed by the caller)."""
    return control is not None and control is not getattr(ctx, "gateway", None)


def engine_weights(control: Any, *, as_base: bool = True) -> tuple[Any, Any] | None:
    """``(model, tokenizer)``: a deep copy of the in-process engine's model (on the
    engine's device; the engine keeps serving its own copy), or None when the engine is
    not in this process or holds no transformers model.

    ``as_base``: the engine also takes the copied weights as the base of the next LoRA
    adapter. The copy holds any adapter served now (SFT's, an earlier run's) merged in, and
    the trainer's fresh adapter is a delta on the copy: without this, the engine would serve
    that delta on the weights from before its first adapter, dropping the earlier one."""
    engine = getattr(control, "engine", None)
    if not hasattr(getattr(engine, "model", None), "state_dict"):  # vLLM's `model` is a name, not weights
        return None
    model = copy.deepcopy(engine.model)
    model.to(engine.device)
    rebase = getattr(engine, "rebase_adapters", None)
    if as_base and rebase is not None:
        rebase()
    return model, getattr(engine, "tokenizer", None)


async def ensure_gateway_llm(ctx: AlgorithmContext) -> None:
    """Publish ``llm = gateway_llm()`` when no LLM resource exists, so agents call the gateway."""
    from agentbolt.runner.gateway_llm import gateway_llm

    latest = await ctx.store.get_latest_resources()
    named = dict(latest.resources) if latest is not None else {}
    if any(isinstance(r, LLM) for r in named.values()):
        return
    named["llm"] = gateway_llm()
    await ctx.store.update_resources(named)
