"""Engines described as data: which engine, with what settings — built where it runs.

An :class:`~agentbolt.engines.engine.Engine` holds open connections or a loaded model,
so it cannot be sent to another process. An :class:`EngineSpec` can (it is plain
pydantic data); ``spec.build()`` makes the engine there. A gateway's description
(:class:`~agentbolt.gateway.spec.GatewaySpec`) holds one.

::

    EngineSpec(kind="vllm", url="http://127.0.0.1:8000/v1", model="Qwen/Qwen2.5-1.5B-Instruct")
    EngineSpec(kind="sglang", url="http://127.0.0.1:30000", tokenizer="Qwen/Qwen2.5-1.5B-Instruct")
    EngineSpec(kind="transformers", path="smollm2")
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from agentbolt.engines.engine import Engine

__all__ = ["SMOLLM2", "EngineSpec"]

SMOLLM2 = "smollm2"
"""``EngineSpec(kind="transformers", path="smollm2")``: the offline SmolLM2-135M-Instruct
(:func:`agentbolt.models.smollm2`, converted once and cached)."""

EngineKind = Literal["openai", "vllm", "sglang", "transformers"]
_SERVERS = ("openai", "vllm", "sglang")  # the kinds that forward to a server at url


class EngineSpec(BaseModel):
    """Which engine, and its settings (the gateway forwards its calls to it).

    * ``kind="openai"`` — any OpenAI-compatible server at ``url`` (no token ids);
      ``kind="vllm"`` — vLLM's OpenAI server at ``url`` (token ids and logprobs).
      ``url`` is the base URL with ``/v1``; a list makes several replicas. ``model``
      replaces whatever model name the program sends; ``api_key`` is sent as a bearer
      token; ``timeout`` is per call (s).
    * ``kind="sglang"`` — SGLang's server on its native ``/generate`` route (token ids and
      logprobs; LoRAs at runtime): ``url`` is the server's root (``http://host:30000``;
      a list makes replicas) and ``tokenizer`` is required (the gateway renders chats
      and sends token ids). Tested against a fake server only.
    * ``kind="transformers"`` — agentbolt's in-process engine over the Hugging Face model
      directory ``path`` (or ``"smollm2"``: the offline SmolLM2-135M-Instruct), with
      ``max_batch_size``, ``batch_window_ms``, ``num_threads``, ``device`` (``"cpu"``,
      ``"cuda"``), ``dtype`` (of the served weights; a trainer in another dtype recomputes
      π_old). Needs torch and transformers (``pip install 'agentbolt[torch]'``).
    * ``max_tokens``: the limit of a call that sets none (any kind; default None: all the
      room the context leaves after the prompt — an agent such as Codex sends no limit,
      and a fixed cut ends its episodes as ``incomplete``). ``context_length``: the
      context window in tokens — transformers: at most the model's
      ``max_position_embeddings`` (the default); vllm (with ``tokenizer``), sglang: the
      server's ``--max-model-len`` / ``--context-length``. A prompt that leaves no room in it is a 400 in the API's own
      error shape (``context_length_exceeded``), recorded on the call's span.
    * ``tool_parser``: how the model writes tool calls (``hermes``, ``llama3_json``,
      ``xlam``; default: read from the chat template). ``tokenizer`` (vllm, sglang): the
      served model's tokenizer directory or Hub name — the gateway then templates chats
      itself and sends token ids to the engine (token-exact history).
    """

    model_config = ConfigDict(extra="forbid")

    kind: EngineKind
    url: str | list[str] | None = None
    model: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    timeout: float = Field(default=300.0, gt=0)
    path: str | None = None
    max_batch_size: int = Field(default=8, ge=1)
    batch_window_ms: float = Field(default=5.0, ge=0)
    num_threads: int | None = Field(default=None, ge=1)
    device: str = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    max_tokens: int | None = Field(default=None, ge=1)
    context_length: int | None = Field(default=None, ge=2)
    tokenizer: str | None = None
    tool_parser: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> EngineSpec:
        if self.kind in _SERVERS:
            if not self.url:
                example = "http://127.0.0.1:30000" if self.kind == "sglang" else "http://127.0.0.1:8000/v1"
                raise ValueError(
                    f"a {self.kind} engine needs the URL of its server, e.g. url='{example}' "
                    "(--engine-url on the command line)"
                )
            if self.path is not None:
                raise ValueError(f"path is for the transformers engine; a {self.kind} engine takes url= (and model=)")
            if self.kind == "openai" and (self.tokenizer or self.tool_parser):
                raise ValueError("an openai engine answers chat itself: tokenizer= and tool_parser= are for the "
                                 "vllm, sglang and transformers engines")
            if self.kind == "sglang" and not self.tokenizer:
                raise ValueError("a sglang engine needs the served model's tokenizer, e.g. "
                                 "tokenizer='Qwen/Qwen2.5-1.5B-Instruct' (--tokenizer): its /generate route takes "
                                 "token ids, and the gateway renders chats with it")
            if self.context_length is not None and not self.tokenizer:
                raise ValueError(f"context_length= needs the gateway to count prompt tokens: give the {self.kind} "
                                 "engine tokenizer= (vllm), or leave the context to the engine's server")
        elif self.tokenizer is not None:
            raise ValueError("tokenizer= is for the vllm and sglang engines; the transformers engine uses its model's "
                             "own")
        elif not self.path:
            raise ValueError(
                "the transformers engine needs a model: path='/dir/of/a/hf/model' or path='smollm2' "
                "(--model-path on the command line)"
            )
        return self

    def build(self) -> Engine:
        """Make the engine (for ``transformers``: load the model — seconds to minutes).

        Raises :class:`agentbolt.models.MissingModelError` when torch, transformers or
        the SmolLM2 package is missing, saying what to install.
        """
        if self.kind == "sglang":
            from agentbolt.engines.sglang_engine import SGLangEngine

            assert self.url is not None
            return SGLangEngine(self.url, tokenizer=self.tokenizer, tool_parser=self.tool_parser,
                                context_length=self.context_length, api_key=self.api_key, model=self.model,
                                timeout=self.timeout, max_tokens=self.max_tokens)
        if self.kind in ("openai", "vllm"):
            from agentbolt.engines.http_engines import OpenAIEngine, VLLMEngine

            assert self.url is not None
            if self.kind == "vllm":
                return VLLMEngine(self.url, api_key=self.api_key, model=self.model, timeout=self.timeout,
                                  tokenizer=self.tokenizer, tool_parser=self.tool_parser,
                                  context_length=self.context_length, max_tokens=self.max_tokens)
            return OpenAIEngine(self.url, api_key=self.api_key, model=self.model, timeout=self.timeout,
                                max_tokens=self.max_tokens)
        return self._transformers()

    def _transformers(self) -> Engine:
        from agentbolt.models import MissingModelError

        missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
        if missing:
            raise MissingModelError(
                f"the transformers engine needs {' and '.join(missing)}: run `pip install torch` "
                "(the CPU build: `pip install torch --index-url https://download.pytorch.org/whl/cpu`) and "
                "`pip install 'agentbolt[torch]'`; or use an engine server instead (kind='vllm', 'sglang' or "
                "'openai' with a url)"
            )
        import torch

        from agentbolt.engines.transformers_engine import TransformersEngine

        assert self.path is not None
        name: str | None
        if self.path == SMOLLM2:
            from agentbolt.models import smollm2

            path = str(smollm2())
            name = self.model or "SmolLM2-135M-Instruct"
        else:
            path, name = self.path, self.model
        kwargs = {"model_name": name} if name else {}
        try:
            return TransformersEngine.from_pretrained(
                path,
                max_batch_size=self.max_batch_size,
                batch_window_ms=self.batch_window_ms,
                num_threads=self.num_threads,
                device=self.device,
                dtype=getattr(torch, self.dtype),  # third-party: torch's dtype by its name
                default_max_tokens=self.max_tokens,
                context_length=self.context_length,
                tool_parser=self.tool_parser,
                **kwargs,
            )
        except OSError as err:  # what transformers raises for a missing or incomplete model
            raise MissingModelError(
                f"cannot load the model at {path!r} ({err}): give a directory saved with save_pretrained "
                f"(config.json, weights, tokenizer) or '{SMOLLM2}'"
            ) from err

    def describe(self) -> str:
        """One line for logs: the kind and where it points (never the API key)."""
        where = self.path if self.kind == "transformers" else self.url
        return f"{self.kind} engine ({where})" + (f", model {self.model}" if self.model else "")
