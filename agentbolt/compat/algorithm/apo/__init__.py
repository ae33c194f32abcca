"""v0.3's ``APO(async_openai_client, ...)``: agentbolt's :class:`~agentbolt.algorithms.APO`
with v0.3's arguments. The critic is ``gradient_model`` and the editor ``apply_edit_model``,
both called through the given ``AsyncOpenAI`` client; the prompt optimised is the
``PromptTemplate`` among the Trainer's ``initial_resources`` (the Trainer sets its name)
or given to :meth:`V03APO.set_initial_resources`.
"""

from __future__ import annotations

from typing import Any

from agentbolt.algorithms.apo import APO as BoltAPO
from agentbolt.types import PromptTemplate

__all__ = ["APO", "OpenAIChat", "V03APO"]


class V03APO(BoltAPO):
    """agentbolt's APO with v0.3's ``set_initial_resources`` / ``get_initial_resources``."""

    initial_resources: dict[str, Any] | None = None

    def set_initial_resources(self, resources: dict[str, Any]) -> None:
        """The resources to start from (published by the Trainer when it has none of its
        own); their one ``PromptTemplate`` is the prompt optimised, under its own key."""
        prompts = [(k, v) for k, v in resources.items() if isinstance(v, PromptTemplate)]
        if len(prompts) != 1:
            raise ValueError(f"APO optimises one prompt: give exactly one PromptTemplate among the resources, "
                             f"got {len(prompts)} ({', '.join(k for k, _ in prompts) or 'none'})")
        key, prompt = prompts[0]
        self.initial_resources = dict(resources)
        self.config = self.config.model_copy(update={"prompt_name": key})
        self.initial_prompt = prompt.template

    def get_initial_resources(self) -> dict[str, Any] | None:
        return self.initial_resources


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
        return V03APO(
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
