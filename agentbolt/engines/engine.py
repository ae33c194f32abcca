"""The one small interface every inference engine implements for the gateway.

The gateway speaks the OpenAI API to agents and forwards each call to an ``Engine``.
Bodies are plain OpenAI JSON dicts (``/v1/chat/completions``, ``/v1/completions``);
answers are OpenAI JSON dicts that MAY carry token ids in vLLM's format:

* ``response["prompt_token_ids"]``: list[int] — the prompt as the engine tokenized it
* ``response["choices"][i]["token_ids"]``: list[int] — the generated tokens
* chosen-token logprobs in the standard OpenAI places
  (``choices[i].logprobs.content[j].logprob`` for chat,
  ``choices[i].logprobs.token_logprobs`` for completions)

An engine that cannot return token ids says so with ``returns_token_ids = False``; the
gateway records that on the span and RL adapters refuse such calls. Engines never
retokenize text to fake ids.

Streaming: ``stream_*`` yields OpenAI chunk dicts (``chat.completion.chunk`` /
``text_completion``); the last chunk(s) carry ``prompt_token_ids`` / ``token_ids`` where
the engine supports it (vLLM sends them per chunk; the gateway concatenates).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from agentbolt.engines.weight_update import WeightUpdate

if TYPE_CHECKING:
    import torch

__all__ = ["Engine", "EngineError"]


class EngineError(Exception):
    """An engine answered with an error (or could not be reached).

    ``status_code`` is the HTTP status to pass on to the agent (429 and 5xx are retried
    by the gateway with backoff); ``body`` is an OpenAI-style error body when the engine
    sent one.
    """

    def __init__(self, status_code: int, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.body = body or {
            "error": {"message": message, "type": "engine_error", "param": None, "code": status_code}
        }

    @property
    def retryable(self) -> bool:
        return self.status_code == 429 or self.status_code >= 500

    @property
    def replica_down(self) -> bool:
        """The replica could not answer at all (unreachable: 502, or a 503/504 from it): with
        several replicas the gateway takes it out (:mod:`agentbolt.gateway.placement`)."""
        return self.status_code in (502, 503, 504)


class Engine(abc.ABC):
    """An OpenAI-compatible model server, local or remote, with one or more replicas."""

    #: a short name for spans and metrics, e.g. ``"transformers"``, ``"vllm"``, ``"openai"``
    name: str = "engine"
    #: whether answers carry prompt/response token ids (vLLM format, see module doc)
    returns_token_ids: bool = False
    #: whether :meth:`load_weights` can load new weights into this engine
    supports_weight_updates: bool = False
    #: the :class:`WeightUpdate` fields it takes: ``state_dict`` / ``lora`` (tensors),
    #: ``lora_path`` (a peft LoRA directory it reads)
    weight_formats: tuple[str, ...] = ()
    #: whether an update may come in parts (:meth:`load_weight_part` ... :meth:`commit_weights`):
    #: what a trainer holding its weights sharded sends, one group of weights at a time
    supports_weight_streams: bool = False
    #: whether :meth:`rebase_loras` can make the weights served now the base of the next LoRA
    supports_rebase: bool = False
    #: the policy's tokenizer, for engines whose completions route takes token ids: the
    #: gateway then renders chats itself (tools included), parses tool calls and builds
    #: prompts from the attempt's earlier token ids (:mod:`agentbolt.engines.token_chat`)
    tokenizer: Any = None
    #: the tool-call parser's name (:data:`agentbolt.engines.tools.PARSERS`); None: from the chat template
    tool_parser: str | None = None
    #: the model's context window in tokens, where known: with a ``tokenizer`` the gateway
    #: refuses a prompt that leaves no room in it (400 ``context_length_exceeded``, recorded)
    #: before the engine is called; None: the engine's server decides
    context_length: int | None = None

    @property
    def n_replicas(self) -> int:
        """How many replicas calls can be spread over (a rollout sticks to one)."""
        return 1

    @property
    def policy_version(self) -> int | None:
        """Version of the weights now served (bumped by a weight swap), if known."""
        return None

    # ---- what an engine in this process offers a trainer (None: it serves from elsewhere) ----
    def local_model(self) -> torch.nn.Module | None:
        """The torch model this engine serves, when it runs in this process (a trainer may
        copy it, start from its exact weights and compare them); None for an engine that
        forwards to a model server (vLLM, OpenAI)."""
        return None

    @property
    def dtype(self) -> torch.dtype | None:
        """The dtype of the served weights, where this process knows it (a trainer on
        another dtype recomputes π_old); None: the model server's own."""
        return None

    @property
    def device(self) -> torch.device | None:
        """The device the served weights are on, where this process knows it (where a
        trainer copying them puts its copy); None: the model server's own."""
        return None

    @abc.abstractmethod
    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        """Answer a non-streaming ``/v1/chat/completions`` body. Raises EngineError."""

    @abc.abstractmethod
    def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        """Yield the chunks of a streaming ``/v1/chat/completions`` call."""

    @abc.abstractmethod
    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        """Answer a non-streaming ``/v1/completions`` body. Raises EngineError."""

    @abc.abstractmethod
    def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        """Yield the chunks of a streaming ``/v1/completions`` call."""

    @abc.abstractmethod
    async def models(self) -> dict[str, Any]:
        """The ``/v1/models`` answer."""

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None) -> int:
        """Serve new weights and return the new ``policy_version``.

        ``update`` holds full or partial weights (``state_dict``), a LoRA (``lora``,
        a peft model or a LoRA state dict with ``lora_scale`` = alpha / r) or a peft
        LoRA directory the engine can read (``lora_path``): see
        :class:`~agentbolt.engines.weight_update.WeightUpdate`. ``version`` defaults to the
        current one + 1. Engines that cannot (``supports_weight_updates = False``) raise
        EngineError(501).
        """
        raise EngineError(
            501,
            f"the {self.name} engine cannot load new weights: it forwards to a model server agentbolt does not "
            "control; to train, serve the policy with the transformers engine (in-process) or with vLLM "
            "(LoRAs through lora_path=)",
        )

    @property
    def incomplete_weights(self) -> bool:
        """Parts of an update in parts were loaded and it was not committed: the weights are
        partly new, and the engine answers every call with a 503 until an update completes."""
        return False

    async def load_weight_part(self, update: WeightUpdate) -> None:
        """Load one part of an update sent in parts — a partial ``state_dict`` — without
        changing ``policy_version``; :meth:`commit_weights` ends the update. From the first
        part on the weights are partly new, so the engine answers no call (503,
        :attr:`incomplete_weights`) until the commit — or, if the update is abandoned, until
        another completes. A part the engine refuses (ValueError: a key or shape the served
        model lacks) changes nothing. Engines that cannot (``supports_weight_streams = False``)
        raise EngineError(501)."""
        raise EngineError(501, f"the {self.name} engine cannot load an update in parts: send the whole update to "
                               "load_weights (full-weight sync of a sharded policy needs the transformers engine)")

    async def commit_weights(self, *, version: int | None = None) -> int:
        """End an update in parts: serve what its parts loaded as ``version`` (default: the
        current one + 1) and return it."""
        raise EngineError(501, f"the {self.name} engine cannot load an update in parts")

    def rebase_loras(self) -> None:
        """Make the weights served now (any LoRA merged in) the base of the next LoRA,
        without changing what is served. Engines that cannot
        (``supports_rebase = False``: vLLM applies each LoRA to the model it loaded)
        raise EngineError(501)."""
        raise EngineError(
            501,
            f"the {self.name} engine applies every LoRA to the model it was started with, so the weights it "
            "serves now cannot become the base of the next one: start it from the trainer's model instead",
        )

    async def update_weights(
        self,
        state_dict: Mapping[str, Any] | None = None,
        *,
        lora: Any = None,
        lora_scale: float | None = None,
        lora_path: str | None = None,
        version: int | None = None,
    ) -> int:
        """:meth:`load_weights` spelled with keywords: the fields of the
        :class:`~agentbolt.engines.weight_update.WeightUpdate` it loads."""
        update = WeightUpdate(state_dict, lora=lora, lora_scale=lora_scale, lora_path=lora_path)
        return await self.load_weights(update, version=version)

    async def probe(self, replica: int) -> None:
        """Check that ``replica``, taken out after a failure, can answer again; raise
        EngineError if not. The gateway calls it when the replica's cool-down has passed.
        An engine in this process has nothing to check."""

    async def start(self) -> None:
        """Open connections / load weights. Idempotent."""

    async def close(self) -> None:
        """Release resources. Idempotent."""
