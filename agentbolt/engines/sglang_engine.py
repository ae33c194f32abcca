"""SGLang's server (``python -m sglang.launch_server``), on its native routes.

:class:`SGLangEngine` answers completions with ``POST /generate`` on token ids
(:mod:`.sglang_native`: the request and answer shapes), so it always needs the served
model's tokenizer: chat calls are rendered with its chat template and answered on token
ids by the gateway (:class:`~agentbolt.engines.token_chat.TokenChat`: tool calls parsed
by agentbolt, each prompt built from the attempt's earlier token ids), as for vLLM with a
tokenizer. Token ids and logprobs are SGLang's own (``output_ids``,
``meta_info.output_token_logprobs``), never re-tokenised.

Several base URLs make several replicas (the gateway pins and places rollouts,
:mod:`agentbolt.gateway.placement`); :meth:`SGLangEngine.probe` asks ``/health_generate``
(a one-token generation) and loads the LoRA served now on a replica that lacks it.
Weights are LoRAs loaded at runtime (``--enable-lora``): ``POST /load_lora_adapter`` on
every replica (:class:`~agentbolt.engines.served_lora.ServedLora`), later calls name it
(``lora_path``), the previous one is unloaded (``/unload_lora_adapter``) and the prefix
cache flushed (``/flush_cache``), so no K/V computed under other weights is reused.

Tested against a fake of those routes (``tests/fakes/sglang_server.py``); untested
against a real SGLang server.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import orjson

from agentbolt.engines.chat_template import load_tokenizer
from agentbolt.engines.engine import EngineError
from agentbolt.engines.http_engines import OpenAIEngine
from agentbolt.engines.served_lora import ServedLora, lora_directory
from agentbolt.engines.sglang_native import Detokenizer, GenerateStream, completion_of, error_of, generate_request
from agentbolt.engines.sse import close_stream
from agentbolt.engines.token_chat import TokenChat
from agentbolt.engines.weight_update import WeightUpdate

__all__ = ["SGLangEngine"]

logger = logging.getLogger("agentbolt.gateway")


class SGLangEngine(OpenAIEngine):
    """SGLang servers at ``base_url`` (its root, e.g. ``http://127.0.0.1:30000``; a list
    makes replicas), answering on ``/generate`` with token ids and logprobs.

    ``tokenizer`` (required): the served model's tokenizer (an object, a directory or a
    Hub name); ``tool_parser``: how the model writes tool calls (default: read from the
    chat template); ``context_length``: the server's context window (a prompt that leaves
    no room is refused by the gateway, 400, without a call). ``model`` is the name answers
    carry (default: the agent's); ``max_tokens`` the limit of a call that sets none
    (default: all the room the context leaves, as SGLang gives it). Weight updates:
    :meth:`load_weights` with ``lora_path=`` (a peft LoRA directory every server can
    read), named ``<lora_name>-v<version>``. The session, timeout and replica handling are
    :class:`OpenAIEngine`'s.
    """

    name = "sglang"
    returns_token_ids = True
    supports_weight_updates = True
    weight_formats = ("lora_path",)

    def __init__(self, base_url: str | Sequence[str], *, tokenizer: Any, tool_parser: str | None = None,
                 context_length: int | None = None, policy_version: int | None = None,
                 lora_name: str = "agentbolt-lora", **kw: Any) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url)
        super().__init__([u.rstrip("/").removesuffix("/v1") for u in urls], **kw)  # native routes are at the root
        if tokenizer is None:
            raise ValueError("the sglang engine needs the served model's tokenizer (tokenizer=<directory or Hub "
                             "name>): its /generate route takes token ids, and the gateway renders chats with it")
        self.tokenizer = load_tokenizer(tokenizer)
        self.detokenizer = Detokenizer(self.tokenizer)
        self.tool_parser = tool_parser
        self.context_length = context_length
        #: chat answered on token ids, for callers of the engine itself (the gateway has its own)
        self.chat = TokenChat(self, self.tokenizer, tool_parser)
        self._policy_version = policy_version
        #: the runtime LoRA the replicas serve, loaded on all of them together
        self.loras = ServedLora(self, lora_name, "SGLang")

    @property
    def policy_version(self) -> int | None:
        return self._policy_version

    def set_policy_version(self, version: int | None) -> None:
        """The version of weights loaded by other means (spans then record it)."""
        self._policy_version = version

    @property
    def lora_name(self) -> str | None:
        """The runtime LoRA calls are answered with (``None``: the base model)."""
        return self.loras.name

    def where(self, replica: int) -> str:
        return self.base_urls[replica % self.n_replicas]

    # ---- the OpenAI side ----------------------------------------------------------------------
    def _body(self, body: dict[str, Any]) -> bytes:
        return orjson.dumps(body)  # already a native request

    def _error(self, status: int, content: bytes, where: str) -> EngineError:
        return error_of(status, content, where)

    def _stream_error(self, payload: dict[str, Any], where: str) -> EngineError | None:
        return None  # GenerateStream reads error events and aborts itself

    def _request(self, body: dict[str, Any], replica: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """The native request for ``body`` on ``replica``, and the answer's common fields."""
        self.loras.check_current(replica)
        request = generate_request(body, lora=self.loras.name, max_tokens=self.default_max_tokens)
        extra = {} if self._policy_version is None else {"policy_version": self._policy_version}
        return request, extra

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        request, extra = self._request(body, replica)
        answer = await self._post("/generate", request, replica)
        model = self.model or body.get("model")
        return {**completion_of(answer, request, body, model=model, detokenizer=self.detokenizer,
                                where=self.where(replica)), **extra}

    async def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        request, extra = self._request({**body, "stream": True}, replica)
        stream = GenerateStream(request, body, model=self.model or body.get("model"), detokenizer=self.detokenizer,
                                where=self.where(replica))
        events = self._stream("/generate", request, replica)
        try:
            async for event in events:
                yield {**stream.chunk(event), **extra}
        finally:
            await close_stream(events)
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {**stream.usage(), **extra}

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        return await self.chat.complete(body, replica=replica)

    def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        return self.chat.stream(body, replica=replica)

    async def models(self) -> dict[str, Any]:
        """The served model (``/get_model_info``) and the LoRA served now, as ``/v1/models``."""
        info = orjson.loads(await self._get(0, "/get_model_info"))
        path = info.get("model_path") if isinstance(info, dict) else None
        data = [{"id": self.model or path or "sglang", "object": "model", "owned_by": "sglang", "root": path}]
        if self.loras.name is not None:
            data.append({"id": self.loras.name, "object": "model", "owned_by": "sglang", "root": self.loras.path,
                         "parent": data[0]["id"]})
        return {"object": "list", "data": data}

    async def _get(self, replica: int, route: str) -> bytes:
        session, base = self._client(replica)
        try:
            async with session.get(base + route) as resp:
                status, content = resp.status, await resp.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise EngineError(502, f"could not reach the SGLang server at {base}: {exc!r}") from exc
        if status >= 400:
            raise EngineError(status, f"the SGLang server at {base} answered {route} with HTTP {status}: "
                                      f"{content[:300].decode('utf-8', 'replace') or 'no body'}")
        return content

    # ---- replicas and weights -----------------------------------------------------------------
    async def probe(self, replica: int) -> None:
        """``GET /health_generate`` on ``replica`` (it generates a token); then, if it lacks
        the LoRA served now (restarted, or unreachable during the load), load it there."""
        await self._on_own_loop(self._probe(replica % self.n_replicas))

    async def _probe(self, replica: int) -> None:
        await self._get(replica, "/health_generate")
        name, path = self.loras.name, self.loras.path
        if name is not None and path is not None:
            body = {"lora_name": name, "lora_path": path}
            status, result = await self._lora_call(replica, "/load_lora_adapter", body)
            if not result.get("success") and name not in (result.get("loaded_adapters") or {}):
                raise EngineError(status, f"SGLang at {self.where(replica)} refused LoRA {name!r} from {path}: "
                                          f"{result.get('error_message')}")
            if result.get("success"):
                await self._flush(replica)
        self.loras.restored(replica)

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None) -> int:
        """Load the LoRA at ``update.lora_path`` on every replica and serve it (see
        :class:`~agentbolt.engines.served_lora.ServedLora` for refusals and replicas that
        cannot be reached). Tensors raise EngineError(501)."""
        path = lora_directory(update, self.name, "SGLang")
        return await self._on_own_loop(self._load_lora(path, version))

    async def _load_lora(self, path: str, version: int | None) -> int:
        new_version = version if version is not None else (self._policy_version or 0) + 1
        loaded = await self.loras.load(path, new_version)
        self._policy_version = new_version
        for replica in loaded:
            await self._flush(replica)
        return new_version

    async def load_lora(self, replica: int, name: str, path: str) -> None:
        status, result = await self._lora_call(replica, "/load_lora_adapter", {"lora_name": name, "lora_path": path})
        if not result.get("success"):
            raise EngineError(status, f"SGLang at {self.where(replica)} refused LoRA {name!r} from {path}: "
                                      f"{result.get('error_message')}")

    async def unload_lora(self, replica: int, name: str) -> None:
        status, result = await self._lora_call(replica, "/unload_lora_adapter", {"lora_name": name})
        if not result.get("success"):
            raise EngineError(status, f"SGLang at {self.where(replica)} could not unload LoRA {name!r}: "
                                      f"{result.get('error_message')}")

    async def _lora_call(self, replica: int, route: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST ``body`` to a LoRA route: the status and SGLang's ``LoRAUpdateOutput``
        (``success``, ``error_message``, ``loaded_adapters``)."""
        status, content = await self._send(replica, route, body)
        try:
            result = orjson.loads(content)
        except orjson.JSONDecodeError:
            result = None
        if not isinstance(result, dict) or "success" not in result:
            raise error_of(status if status >= 400 else 502, content, self.where(replica))
        return status, result

    async def _flush(self, replica: int) -> None:
        """``/flush_cache`` after the weights changed (nothing runs then: the gateway drained
        its calls); a refusal is logged, not raised (the weights are served already)."""
        base = self.where(replica)
        try:
            status, content = await self._send(replica, "/flush_cache")
        except EngineError as exc:
            logger.warning("could not flush the cache of %s after a weight change: %s", base, exc.message)
            return
        if status >= 400:
            logger.warning("%s did not flush its cache after a weight change (HTTP %d: %s): K/V computed under the "
                           "previous weights may be reused", base, status, content[:200].decode("utf-8", "replace"))
