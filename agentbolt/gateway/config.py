"""How the gateway treats calls: forced sampling per rollout mode, retries, timeouts,
what it asks engines for, and how spans are batched into the store."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentbolt.types import RolloutMode

__all__ = ["GatewayConfig"]


class GatewayConfig(BaseModel):
    """Settings of a :class:`~agentbolt.gateway.Gateway`.

    ``sampling`` maps a rollout mode (``train``, ``val``, ``test``) to request fields the
    gateway forces on every call of such a rollout, whatever the agent sent, e.g.
    ``{"train": {"temperature": 1.0, "top_k": None}, "val": {"temperature": 0.0}}``;
    a ``None`` value removes the field from the call (GRPO strips every setting that would
    make the sampled distribution differ from the one the engine reports logprobs of).
    """

    model_config = ConfigDict(extra="forbid")

    sampling: dict[str, dict[str, Any]] = Field(default_factory=dict)
    max_retries: int = Field(default=2, ge=0, description="Retries of an engine 429/5xx/timeout.")
    retry_backoff: float = Field(default=0.1, ge=0, description="First retry delay (s); doubles each retry.")
    request_timeout: float = Field(default=300.0, gt=0, description="Per engine call (s); a timeout is a 504.")
    logprobs: bool = Field(default=True, description="Ask the engine for chosen-token logprobs.")
    return_token_ids: bool = Field(
        default=True, description="Send return_token_ids: true to engines that return token ids."
    )
    token_chat: bool = Field(
        default=True,
        description="For engines with a tokenizer (the local engine): render chats and parse tool calls in the "
        "gateway and send token ids, reusing the attempt's earlier prompt and sampled ids (token-exact history).",
    )
    retry_after: int = Field(default=1, ge=0, description="Retry-After (s) sent with 429 while paused.")
    pause_hold_s: float = Field(
        default=0.0, ge=0,
        description="While paused, hold a new call up to this long for the resume instead of answering 429 "
        "at once (GRPO sets 60 s on a gateway of its own process: a weight swap then costs the agent no retry).",
    )
    replica_cooldown_s: float = Field(
        default=10.0, gt=0,
        description="With several engine replicas: how long one that stopped answering (unreachable, 502-504) "
        "stays out before the gateway probes it again.",
    )
    span_batch_size: int = Field(default=256, ge=1, description="Spans per store write.")
    span_flush_interval: float = Field(default=0.05, gt=0, description="Longest wait before spans are written (s).")
    mode_cache_size: int = Field(default=100_000, ge=1, description="Rollouts whose mode and replica are remembered.")

    @field_validator("sampling")
    @classmethod
    def _known_modes(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        known = {m.value for m in RolloutMode}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"unknown rollout mode(s) {unknown} in sampling: use {sorted(known)}")
        return value
