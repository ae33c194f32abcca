"""v0.3's ``APO(async_openai_client, ...)``: agentbolt's :class:`~agentbolt.algorithms.APO`
with v0.3's arguments. The critic is ``gradient_model`` and the editor ``apply_edit_model``,
both called through the given ``AsyncOpenAI`` client; the prompt optimised is the
``PromptTemplate`` among the Trainer's ``initial_resources`` (the Trainer sets its name).
"""

from __future__ import annotations

from typing import Any

__all__ = ["APO", "OpenAIChat"]


class OpenAIChat:
    """An ``AsyncOpenAI`` client and a model name as APO's critic or editor."""

    def __init__(self, client: Any, model: str) -> None:
        self.client = client
        self.model = model

    async def chat(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                   max_tokens: int | None = None) -> str:
        options: dict[str, Any] = {}
        if temperature is not None:
            options["temperature"] = temperature
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        reply = await self.client.chat.completions.create(model=self.model, messages=messages, **options)
        return reply.choices[0].message.content or ""

    async def aclose(self) -> None:
        """The client is the caller's: it stays open."""


class APO:
    """Build agentbolt's APO from v0.3's arguments (``APO[Task](...)`` works too)."""

    def __class_getitem__(cls, _item: Any) -> type[APO]:
        return cls

    def __new__(  # returns agentbolt's APO
        cls,
        async_openai_client: Any,
        *,
        gradient_model: str = "gpt-5-mini",
        apply_edit_model: str = "gpt-4.1-mini",
        diversity_temperature: float = 1.0,
        gradient_batch_size: int = 4,
        val_batch_size: int = 16,
        beam_width: int = 4,
        branch_factor: int = 4,
        beam_rounds: int = 3,
        rollout_batch_timeout: float = 3600.0,
        run_initial_validation: bool = True,
        **_debug: Any,
    ) -> Any:
        from agentbolt.algorithms.apo import APO as BoltAPO

        return BoltAPO(
            critic=OpenAIChat(async_openai_client, gradient_model),
            editor=OpenAIChat(async_openai_client, apply_edit_model),
            critic_temperature=diversity_temperature,
            train_batch_size=gradient_batch_size,
            val_batch_size=val_batch_size,
            beam_width=beam_width,
            branch_factor=branch_factor,
            rounds=beam_rounds,
            rollout_timeout=rollout_batch_timeout,
            eval_before=run_initial_validation,
        )
