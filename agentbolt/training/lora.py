"""``LoraSettings``: the LoRA a trainer puts on the model — W + (α/r)·B·A.

One typed object shared by every algorithm that trains weights (GRPO, SFT); ``None`` in
their configs means full fine-tuning. :class:`~agentbolt.training.policy.Policy` wraps the
model with a fresh peft LoRA built from it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LoraSettings"]


class LoraSettings(BaseModel):
    """A LoRA (peft) on the attention projections: W + (α/r)·B·A."""

    model_config = ConfigDict(extra="forbid")

    r: int = Field(16, ge=1)
    alpha: float = Field(32.0, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
