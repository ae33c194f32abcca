"""The critic's and editor's models: an endpoint, the run's own engine (``"gateway"``), or any chat object."""

from __future__ import annotations

from typing import Any

from agentbolt.algorithms.apo.config import APOConfig
from agentbolt.algorithms.apo.result import APOError
from agentbolt.algorithms.apo.textual_gradient import (
    ChatModel,
    EngineChatModel,
    HttpChatModel,
    SupportsChat,
)
from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.types import LLM

__all__ = ["chat_model_for", "check_model_spec"]


def check_model_spec(spec: Any, name: str) -> Any:
    """``spec`` if it names a model APO can talk to, else an :class:`APOError` saying what would."""
    if isinstance(spec, LLM) or spec == "gateway" or (isinstance(spec, SupportsChat) and callable(spec.chat)):
        return spec
    raise APOError(f"{name} must be an agentbolt.LLM(endpoint=..., model=..., api_key=...), 'gateway' (the run's "
                   f"own engine) or an object with an async chat(messages, ...) method; got {spec!r}")


def chat_model_for(
    spec: LLM | str | ChatModel, ctx: AlgorithmContext, name: str, cfg: APOConfig
) -> tuple[ChatModel, bool]:
    """The model to talk to, and whether it was made here (and is closed here)."""
    retry: dict[str, Any] = {"max_retries": cfg.llm_max_retries, "retry_backoff": cfg.llm_retry_backoff, "name": name}
    if isinstance(spec, LLM):
        return HttpChatModel(spec, timeout=cfg.llm_timeout, **retry), True
    if spec == "gateway":
        engine = ctx.gateway.engine if ctx.gateway is not None else None
        if engine is not None:
            return EngineChatModel(engine, **retry), True
        from agentbolt.store.http import HttpStore

        if isinstance(ctx.store, HttpStore):  # the server's admin route to its engine
            llm = LLM(endpoint=ctx.store.base_url + "/v1/gateway", model="policy", api_key=ctx.store.token)
            return HttpChatModel(llm, timeout=cfg.llm_timeout, **retry), True
        raise APOError(
            f"{name}='gateway' asks the run's own engine, and this run has none: give the trainer one "
            "(Trainer(gateway=EngineSpec(...))) or pass "
            f"{name}=agentbolt.LLM(endpoint='https://.../v1', model='...', api_key=...)"
        )
    if isinstance(spec, str):  # check_model_spec lets only "gateway" through
        raise APOError(f"{name} must be an agentbolt.LLM, 'gateway' or a chat model; got {spec!r}")
    return spec, False
