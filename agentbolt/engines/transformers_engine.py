"""The built-in local engine: a Hugging Face causal LM served in-process through the
OpenAI API shapes, with token ids and logprobs, dynamic batching and weight hot-swaps.

* Chat prompts go through the tokenizer's chat template
  (``apply_chat_template(messages, tools=..., add_generation_prompt=True)``); completions
  prompts are tokenized as given (a string, or a list of token ids used verbatim).
* Every answer carries ``prompt_token_ids`` and ``choices[0].token_ids`` (vLLM's format).
  ``token_ids`` holds every sampled token, including a final EOS / stop token and the
  tokens of a matched stop string; the returned text excludes both.
* Logprobs (when asked: ``logprobs: true`` for chat, ``logprobs: k`` for completions) are
  the RAW model distribution: log-softmax of the logits at temperature 1, before top-p —
  like vLLM's default. The token is drawn from the tempered, top-p-filtered distribution.
* One choice per request (``n=1``). Chat calls are answered through the completions path
  on token ids (:class:`~agentbolt.engines.token_chat.TokenChat`): ``tools`` and
  ``tool_choice`` go into the chat template, the output is parsed into ``tool_calls`` by
  the ``tool_parser`` (default: read from the template; see :mod:`agentbolt.engines.tools`).
* ``seed`` makes a request reproducible (its own RNG). Batched rows can differ from a lone
  run in the last float bits (and a prompt whose prefix K/V was reused from the cache from
  one computed afresh), so bit-exact replay holds for the same batch composition and cache
  state; the logprobs are always those of the logits the token was drawn from.
* Fast path (Llama-shaped models, fp32 on CPU): the linear layers run through oneDNN on
  packed copies of the weights for two rows or more (about twice MKL's speed on AVX-512
  CPUs), and through MKL on transposed copies of the weights whose output is longer than
  their input for one row, where a step with one sequence runs fewer, fused ops per layer.
  The copies are remade when a weight changes and cost memory: for SmolLM2-135M 538 MB +
  392 MB beside the model's 538 MB. The K/V buffer holds ``max_batch_size`` rows x the
  longest sequence (46 KB per position for SmolLM2-135M).
* Runs on CPU (the default, uses torch's thread count or ``num_threads``; on a CPU shared
  with other busy processes ``num_threads=1`` avoids thread-pool stalls); ``device="cuda"``
  runs on a GPU — written for it, but only CPU is tested in this repository.
* Batching is continuous for Llama-shaped models (Llama, Mistral without sliding window,
  Qwen2/3: :mod:`agentbolt.engines.local.continuous`): requests join the running batch at
  the next decode step and leave it when done; new prompts are prefilled in the same
  weight pass as the running rows' next tokens; logits are computed only where a token is
  sampled; K/V live in a preallocated buffer; identical prompts admitted together (a GRPO
  group) are prefilled once, and a prompt that extends a cached one (the group's prompt,
  or an agent's previous prompt + answer) prefills only its new tokens. Other models (or
  ``scheduler="per-batch"``) batch per batch: new requests wait for the running batch.
  Either way, weight swaps wait for the running rows, and answers carry
  ``policy_version``, the weights version the whole answer was generated with.
* An update may come in parts (:meth:`TransformersEngine.load_weight_part`, then
  :meth:`~TransformersEngine.commit_weights`: a sharded trainer's full weights, group by
  group, :mod:`agentbolt.gateway.weight_stream`): each part is copied in place between
  batches, and from the first part to the commit every request is answered 503 — also
  after an abandoned update, until one completes.

Example::

    engine = TransformersEngine.from_pretrained(agentbolt.models.smollm2())
    answer = await engine.chat_completions({"messages": [{"role": "user", "content": "Hi"}]})
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import torch

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.local.continuous import ContinuousScheduler
from agentbolt.engines.local.llama_forward import unsupported_reason
from agentbolt.engines.local.sampling import SamplingParams, parse_sampling
from agentbolt.engines.local.scheduler import (
    BatchScheduler,
    DoneEvent,
    EngineStats,
    GenRequest,
    TokenEvent,
    incomplete_error,
)
from agentbolt.engines.local.weights import (
    LoraMerger,
    load_full,
    lora_from,
    read_lora_dir,
)
from agentbolt.engines.token_chat import TokenChat
from agentbolt.engines.weight_update import WeightUpdate

__all__ = ["TransformersEngine"]


def _bad(message: str, param: str | None = None) -> EngineError:
    return EngineError(400, message, {"error": {"message": message, "type": "invalid_request_error",
                                                "param": param, "code": None}})


class TransformersEngine(Engine):
    """Serve ``model`` (a transformers causal LM) with ``tokenizer``'s chat template.

    ``max_batch_size`` rows share each forward pass; requests arriving within
    ``batch_window_ms`` of each other on an idle engine start together, later ones join at
    the next step (``scheduler="per-batch"``: at the next batch).
    ``default_max_tokens`` applies when a request sets none (None: all the room the context
    leaves after the prompt). ``context_length``: the context window in tokens (default and
    most: the model's ``max_position_embeddings``); a prompt that leaves no room in it is a
    400 (``context_length_exceeded``). ``scheduler``: ``"auto"``
    (continuous batching where the model is Llama-shaped, else per batch) or
    ``"per-batch"``. ``prefix_cache_tokens`` bounds the cached prefixes' K/V (continuous
    scheduler; ~46 KB per token for SmolLM2-135M in fp32).
    """

    name = "transformers"
    returns_token_ids = True
    supports_weight_updates = True
    weight_formats = ("state_dict", "lora", "lora_path")
    supports_weight_streams = True
    supports_rebase = True

    def __init__(self, model: Any, tokenizer: Any, *, max_batch_size: int = 8, batch_window_ms: float = 5,
                 device: str | torch.device = "cpu", dtype: torch.dtype | None = None,
                 model_name: str | None = None, default_max_tokens: int | None = None,
                 context_length: int | None = None,
                 num_threads: int | None = None, tool_parser: str | None = None,
                 scheduler: Literal["auto", "per-batch"] = "auto", prefix_cache_tokens: int = 8192) -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        self._device = torch.device(device)
        self.model = model.to(device=self._device, dtype=dtype) if dtype is not None else model.to(self._device)
        self.model.eval()
        self.tokenizer = tokenizer
        self.chat = TokenChat(self, tokenizer, tool_parser)  # raises for a tokenizer without a chat template
        self.tool_parser = self.chat.template.parser_name
        path = getattr(model.config, "_name_or_path", None)  # third-party: transformers configs vary
        self.model_name = model_name or path or "local-model"
        if default_max_tokens is not None and default_max_tokens < 1:
            raise ValueError(f"default_max_tokens must be >= 1 (or None: what the context leaves), got "
                             f"{default_max_tokens}")
        self.default_max_tokens = default_max_tokens
        window = int(getattr(model.config, "max_position_embeddings", 2048))  # third-party: transformers configs vary
        if context_length is not None and not 1 < context_length <= window:
            raise ValueError(f"context_length must be in [2, {window}] (the model's max_position_embeddings), got "
                             f"{context_length}")
        self.max_model_len = context_length or window
        self.context_length = self.max_model_len
        eos: set[int] = set()
        eos_id = getattr(model.generation_config, "eos_token_id", None)  # third-party: transformers configs vary
        for source in (eos_id, tokenizer.eos_token_id):
            if isinstance(source, int):
                eos.add(source)
            elif source:
                eos.update(int(t) for t in source)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos or {0})
        self._lora = LoraMerger()
        if scheduler not in ("auto", "per-batch"):
            raise ValueError(f"scheduler must be 'auto' or 'per-batch', not {scheduler!r}")
        common: dict[str, Any] = {"max_batch_size": max_batch_size, "batch_window_s": batch_window_ms / 1000,
                                  "device": self.device, "eos_ids": eos, "pad_id": pad, "num_threads": num_threads}
        self._scheduler: BatchScheduler
        if scheduler == "auto" and unsupported_reason(self.model) is None:
            self._scheduler = ContinuousScheduler(self.model, tokenizer, max_len=self.max_model_len,
                                                  prefix_cache_tokens=prefix_cache_tokens, **common)
        else:
            self._scheduler = BatchScheduler(self.model, tokenizer, **common)

    @classmethod
    def from_pretrained(
        cls, path_or_name: str | Any, *, dtype: torch.dtype | None = None, **kw: Any
    ) -> TransformersEngine:
        """Load a model directory (e.g. ``agentbolt.models.smollm2()``) or Hub name."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(path_or_name, dtype=dtype or torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(path_or_name)
        kw.setdefault("model_name", str(path_or_name).rstrip("/").rsplit("/", 1)[-1])
        return cls(model, tokenizer, **kw)

    # ---- Engine properties -----------------------------------------------------------------
    @property
    def policy_version(self) -> int:
        return self._scheduler.policy_version

    @property
    def scheduler_kind(self) -> str:
        """``"continuous"`` or ``"per-batch"``: which scheduler serves this engine."""
        return "continuous" if isinstance(self._scheduler, ContinuousScheduler) else "per-batch"

    @property
    def stats(self) -> EngineStats:
        """Forward passes, batch sizes and generated tokens since start (for tests/benchmarks)."""
        return self._scheduler.stats

    async def start(self) -> None:
        self._scheduler.start()

    async def close(self) -> None:
        await asyncio.to_thread(self._scheduler.stop)

    async def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model_name, "object": "model", "created": 0,
                                            "owned_by": "agentbolt", "max_model_len": self.max_model_len}]}

    # ---- weights ---------------------------------------------------------------------------
    async def load_weights(self, update: WeightUpdate, *, version: int | None = None) -> int:
        """Hot-swap weights between batches and return the new ``policy_version``.

        ``update.state_dict``: full or partial weights of the served architecture (a merged peft
        model's ``state_dict()`` works too: its prefixes are stripped). ``lora``: a peft
        ``PeftModel`` (its active LoRA and scale are read) or a LoRA state dict as
        ``peft.get_peft_model_state_dict`` returns (then pass ``lora_scale`` = alpha / r);
        ``lora_path``: a peft LoRA directory (``save_pretrained``'s
        ``adapter_config.json`` + ``adapter_model.safetensors``; the scale is read from the
        config). The engine serves base + LoRA, and a later LoRA replaces, not adds to, it.
        The running rows finish on the old weights; queued requests wait and run on the new
        ones; nothing is dropped. Cached prompt prefixes (K/V of the old weights) are dropped.
        ``version`` defaults to the current one + 1.
        Safe to await from any event loop or thread.
        """
        state_dict, lora, lora_scale, lora_path = update.state_dict, update.lora, update.lora_scale, update.lora_path
        if lora is not None and lora_path is not None:
            raise ValueError("update_weights takes lora= or lora_path=, not both")
        if lora_path is not None:
            lora, lora_scale = await asyncio.to_thread(read_lora_dir, lora_path)
        if state_dict is None and lora is None:
            raise ValueError("update_weights needs state_dict=... and/or lora=... (or lora_path=...)")
        delta = lora_from(lora, lora_scale) if lora is not None else None
        if state_dict is not None:  # copy now: the trainer may keep updating its tensors
            state_dict = {k: v.detach().to("cpu", copy=True) for k, v in state_dict.items()}
        if delta is not None:
            delta = ({k: v.detach().to("cpu", copy=True) for k, v in delta[0].items()}, delta[1])

        def apply() -> None:
            if state_dict is not None:  # a full load becomes the base of later LoRAs
                load_full(self.model, state_dict, before=lambda: self._lora.restore(self.model))
            if delta is not None:
                self._lora.apply(self.model, delta[0], delta[1])

        return await asyncio.wrap_future(self._scheduler.swap(apply, version))

    async def load_weight_part(self, update: WeightUpdate) -> None:
        """One part of an update in parts (see :meth:`Engine.load_weight_part`): a partial
        state dict, copied into the served weights between batches (the first part puts a
        served LoRA's base back first, as a full load does). The caller's tensors are read
        before this returns and not kept."""
        if update.formats != ("state_dict",):
            raise ValueError(f"the parts of an update in parts are partial state dicts (state_dict=...), not "
                             f"{list(update.formats) or 'nothing'}; send a LoRA whole, with load_weights")
        state = update.state_dict
        assert state is not None

        def apply() -> None:
            first = not self._scheduler.incomplete
            load_full(self.model, state, before=(lambda: self._lora.restore(self.model)) if first else None)

        await asyncio.wrap_future(self._scheduler.swap(apply, None, commit=False))

    async def commit_weights(self, *, version: int | None = None) -> int:
        """Serve what the parts loaded as ``version`` (see :meth:`Engine.commit_weights`)."""
        return await asyncio.wrap_future(self._scheduler.swap(lambda: None, version))

    @property
    def incomplete_weights(self) -> bool:
        return self._scheduler.incomplete

    async def probe(self, replica: int) -> None:
        """Taken out after a 503: back once its weights are whole again."""
        if self._scheduler.incomplete:
            raise incomplete_error(self.policy_version)

    def rebase_loras(self) -> None:
        """Make the weights served now the base of the next LoRA (the current one
        stays merged in). Call it when a trainer copies the served model to put a fresh
        LoRA on it, so that LoRA is served on top of what the trainer copied. Nothing
        served changes, so the policy version stays."""
        self._lora.rebase()

    def local_model(self) -> torch.nn.Module:
        """The model served, in this process (see :meth:`Engine.local_model`)."""
        return self.model

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the served weights (a trainer on another dtype recomputes π_old)."""
        return next(self.model.parameters()).dtype

    @property
    def device(self) -> torch.device:
        """The device the served weights are on."""
        return self._device

    # ---- prompts ---------------------------------------------------------------------------
    def chat_prompt_ids(self, body: dict[str, Any]) -> list[int]:
        """The prompt token ids of a chat body, via the chat template (tools included)."""
        return self.chat.template.prompt_ids(body, self.chat.template.tool_mode(body))

    def completion_prompt_ids(self, body: dict[str, Any]) -> list[int]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if body.get("echo"):
            raise _bad("echo is not supported by the transformers engine", "echo")
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt)["input_ids"])
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return list(prompt)
        raise _bad("'prompt' must be one string or one list of token ids (one prompt per request)", "prompt")

    # ---- generation ------------------------------------------------------------------------
    def _request(self, prompt_ids: list[int], body: dict[str, Any], top_logprobs: int) -> GenRequest:
        params: SamplingParams = parse_sampling(body, default_max_tokens=self.default_max_tokens,
                                                room=self.max_model_len - len(prompt_ids), top_logprobs=top_logprobs)
        if not prompt_ids:
            raise _bad("the prompt is empty: send at least one token", "prompt")
        vocab = int(self.model.config.vocab_size)
        if any(t < 0 or t >= vocab for t in prompt_ids):
            raise _bad(f"prompt token ids must be in [0, {vocab})", "prompt")
        return GenRequest(prompt_ids=prompt_ids, params=params)

    async def _events(self, req: GenRequest) -> AsyncIterator[TokenEvent | DoneEvent]:
        req.loop = asyncio.get_running_loop()
        self._scheduler.submit(req)
        try:
            while True:
                event = await req.events.get()
                if isinstance(event, EngineError):
                    raise event
                if isinstance(event, BaseException):
                    raise EngineError(500, f"the transformers engine failed while generating: {event!r}") from event
                yield event
                if isinstance(event, DoneEvent):
                    return
        finally:
            req.cancelled = True  # a no-op when finished; frees the row when the caller went away

    def _token_text(self, token: int) -> str:
        return self.tokenizer.decode([token])

    @staticmethod
    def _usage(prompt: int, completion: int) -> dict[str, int]:
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        return await self.chat.complete(body)

    def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        return self.chat.stream(body)

    @staticmethod
    def _completion_logprobs_wanted(body: dict[str, Any]) -> tuple[bool, int]:
        lp = body.get("logprobs")
        if lp is None or lp is False:
            return False, 0
        k = 0 if lp is True else int(lp)
        if not 0 <= k <= 20:
            raise _bad("logprobs must be between 0 and 20", "logprobs")
        return True, k

    def _completion_lp_part(self, ev: TokenEvent, offset: int) -> dict[str, Any]:
        return {"tokens": [self._token_text(ev.token_id)], "token_logprobs": [ev.logprob],
                "top_logprobs": [{self._token_text(i): lp for i, lp in ev.top}], "text_offset": [offset]}

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        want, k = self._completion_logprobs_wanted(body)
        req = self._request(self.completion_prompt_ids(body), body, k)
        text: list[str] = []
        lps: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        done = None
        offset = 0
        async for ev in self._events(req):
            if isinstance(ev, TokenEvent) and want:
                for key, value in self._completion_lp_part(ev, offset).items():
                    lps[key].extend(value)
            text.append(ev.text)
            offset += len(ev.text)
            if isinstance(ev, DoneEvent):
                done = ev
        assert done is not None
        return {
            "id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
            "model": self.model_name,
            "choices": [{"index": 0, "text": "".join(text), "logprobs": lps if want else None,
                         "finish_reason": done.finish_reason, "token_ids": list(req.token_ids)}],
            "usage": self._usage(len(req.prompt_ids), len(req.token_ids)),
            "prompt_token_ids": list(req.prompt_ids),
            "policy_version": done.policy_version,
        }

    def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        want, k = self._completion_logprobs_wanted(body)
        req = self._request(self.completion_prompt_ids(body), body, k)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return self._completion_stream(req, want, include_usage)

    async def _completion_stream(
        self, req: GenRequest, want: bool, include_usage: bool
    ) -> AsyncIterator[dict[str, Any]]:
        base = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": self.model_name}
        first, offset = True, 0
        async for ev in self._events(req):
            extra: dict[str, Any] = {"prompt_token_ids": list(req.prompt_ids)} if first else {}
            first = False
            if isinstance(ev, TokenEvent):
                choice = {"index": 0, "text": ev.text, "finish_reason": None, "token_ids": [ev.token_id],
                          "logprobs": self._completion_lp_part(ev, offset) if want else None}
            else:
                choice = {"index": 0, "text": ev.text, "finish_reason": ev.finish_reason, "token_ids": [],
                          "logprobs": None}
                extra["policy_version"] = ev.policy_version
            offset += len(ev.text)
            yield {**base, "choices": [choice], **extra}
        if include_usage:
            yield {**base, "choices": [], "usage": self._usage(len(req.prompt_ids), len(req.token_ids))}
