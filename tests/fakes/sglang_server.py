"""A fake SGLang server speaking SGLang's native routes and shapes, with a tiny
deterministic "model" (real HTTP when served with ``serve_app_in_thread(fake.app)``).

Routes and shapes (read from SGLang's ``http_server.py``, ``io_struct.py`` and
``tokenizer_manager.py``; only what the engine uses is modelled):

* ``POST /generate`` ``{"input_ids" | "text", "sampling_params", "return_logprob",
  "logprob_start_len", "top_logprobs_num", "return_text_in_logprobs", "lora_path",
  "stream"}`` → ``{"text", "output_ids", "meta_info": {"id", "finish_reason",
  "prompt_tokens", "completion_tokens", "cached_tokens", "weight_version",
  "output_token_logprobs": [[logprob, token_id, text|null], ...], "input_token_logprobs",
  "output_top_logprobs"}}``. ``finish_reason`` is ``{"type": "stop", "matched": <eos id>}``
  or ``{"type": "length", "length": n}``. ``max_new_tokens`` left out means 128, ``null``
  all the room the context leaves. An unknown sampling parameter, a prompt past the
  context, a LoRA that is not loaded: 400 ``{"error": {"message": ...}}``. With
  ``stream: true``: ``data:`` events of the output so far (cumulative, SGLang's default;
  ``incremental=True`` sends only what is new, as ``--incremental-streaming-output``),
  then ``data: [DONE]``. ``abort_next`` makes the next call end as SGLang ends an aborted
  request: a 200 whose ``finish_reason`` is ``{"type": "abort", "message", "status_code"}``
  (streamed as the last event), as older versions answer. ``skip_tokenizer_init=True``
  answers as a server started with ``--skip-tokenizer-init``: ids without ``text`` (and
  logprob entries without their text); a text prompt is refused.
* ``GET /get_model_info``, ``GET /health``, ``GET /health_generate``.
* ``POST /load_lora_adapter {"lora_name", "lora_path"}`` / ``POST /unload_lora_adapter
  {"lora_name"}`` → ``LoRAUpdateOutput`` ``{"success", "error_message",
  "loaded_adapters": {name: path}}``, 400 when not a success (a name already loaded, a
  directory without ``adapter_config.json``, an unknown name, a server started without
  ``--enable-lora``).
* ``POST /flush_cache`` → 200 ``Cache flushed...`` (400 while a request runs).

The model: the reply is ``reply(prompt_text)`` (default ``"Four."``) in the tokenizer's
ids, then the end-of-turn id; the logprob of output token ``i`` is a pure function of the
weights answering (``base`` or the LoRA's name) and ``i`` (:meth:`FakeSGLang.logprob`), so
which weights answered a call can be read off its logprobs.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

MODEL_PATH = "Qwen/Qwen2.5-0.5B-Instruct"
CONTEXT_LENGTH = 4096
SAMPLING_FIELDS = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "custom_params", "stream_interval", "logit_bias", "sampling_seed",
}


def _error(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": {"message": message}}, status_code=status)


class FakeSGLang:
    """One fake SGLang server: ``seen`` (``/generate`` bodies), ``lora_calls`` (route,
    body), ``adapters`` (name → path), ``flushes``; ``tokenizer`` is the served model's."""

    def __init__(self, tokenizer: Any, *, reply: Callable[[str], str] | None = None, incremental: bool = False,
                 enable_lora: bool = True, skip_tokenizer_init: bool = False) -> None:
        self.tokenizer = tokenizer
        self.reply = reply or (lambda prompt: "Four.")
        self.incremental = incremental
        self.enable_lora = enable_lora
        self.skip_tokenizer_init = skip_tokenizer_init
        self.seen: list[dict[str, Any]] = []
        self.lora_calls: list[tuple[str, dict[str, Any]]] = []
        self.adapters: dict[str, str] = {}
        self.flushes = 0
        self.running = 0
        self.abort_next: tuple[str, int] | None = None  # (message, status_code)
        self._n = 0
        self.app = Starlette(routes=[
            Route("/generate", self.generate, methods=["POST", "PUT"]),
            Route("/get_model_info", self.model_info),
            Route("/health", self.health),
            Route("/health_generate", self.health),
            Route("/load_lora_adapter", self.load_lora, methods=["POST"]),
            Route("/unload_lora_adapter", self.unload_lora, methods=["POST"]),
            Route("/flush_cache", self.flush_cache, methods=["GET", "POST"]),
        ])

    # ---- the model ---------------------------------------------------------------------------
    @staticmethod
    def logprob(weights: str, i: int) -> float:
        """The logprob of output token ``i`` under ``weights`` (``"base"`` or a LoRA name)."""
        return -(1 + zlib.crc32(f"{weights}:{i}".encode()) % 97) / 100

    def _answer_ids(self, input_ids: list[int]) -> list[int]:
        text = self.tokenizer.decode(input_ids, skip_special_tokens=False)
        return [*self.tokenizer(self.reply(text), add_special_tokens=False)["input_ids"], self.tokenizer.eos_token_id]

    def _entry(self, lp: float | None, token: int, with_text: bool) -> list[Any]:
        return [lp, token, self.tokenizer.decode([token]) if with_text else None]

    # ---- routes ------------------------------------------------------------------------------
    async def generate(self, request: Request) -> Response:
        body = await request.json()
        self.seen.append(body)
        self._n += 1
        sampling = body.get("sampling_params") or {}
        if unknown := sorted(set(sampling) - SAMPLING_FIELDS):
            return _error(f"Unexpected sampling parameters {unknown}")
        if isinstance(body.get("input_ids"), list):
            input_ids = body["input_ids"]
        elif isinstance(body.get("text"), str) and not self.skip_tokenizer_init:
            input_ids = self.tokenizer(body["text"], add_special_tokens=False)["input_ids"]
        else:
            return _error("Either text, input_ids or input_embeds should be provided.")
        if len(input_ids) >= CONTEXT_LENGTH:
            return _error(f"The input ({len(input_ids)} tokens) is longer than the model's context length "
                          f"({CONTEXT_LENGTH} tokens).")
        lora = body.get("lora_path")
        if lora is not None and lora not in self.adapters:
            return _error(f"The following requested LoRA adapters are not loaded: {lora}")
        limit = sampling.get("max_new_tokens", 128)
        room = CONTEXT_LENGTH - len(input_ids) - 1
        limit = room if limit is None else min(limit, room)
        full = self._answer_ids(input_ids)
        out = full[:limit]
        finish = {"type": "stop", "matched": out[-1]} if len(out) == len(full) else {"type": "length", "length": limit}
        weights = lora or "base"
        abort, self.abort_next = self.abort_next, None
        rid = f"rid-{self._n}"
        if body.get("stream"):
            return StreamingResponse(self._events(body, rid, input_ids, out, finish, weights, abort),
                                     media_type="text/event-stream")
        if abort is not None:
            return JSONResponse(self._state(body, rid, input_ids, out[:1], weights, self._abort(abort)))
        return JSONResponse(self._state(body, rid, input_ids, out, weights, finish))

    @staticmethod
    def _abort(abort: tuple[str, int]) -> dict[str, Any]:
        return {"type": "abort", "message": abort[0], "status_code": abort[1]}

    def _state(self, body: dict[str, Any], rid: str, input_ids: list[int], out: list[int], weights: str,
               finish: dict[str, Any] | None, start: int = 0) -> dict[str, Any]:
        """The answer after ``out`` (the tokens from ``start`` on, for an incremental event)."""
        with_text = bool(body.get("return_text_in_logprobs")) and not self.skip_tokenizer_init
        meta: dict[str, Any] = {"id": rid, "finish_reason": finish, "prompt_tokens": len(input_ids),
                                "completion_tokens": start + len(out), "cached_tokens": 0, "weight_version": "default"}
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [self._entry(self.logprob(weights, start + i), t, with_text)
                                             for i, t in enumerate(out)]
            if body.get("logprob_start_len") == 0:
                meta["input_token_logprobs"] = [self._entry(None if i == 0 else -1.0, t, with_text)
                                                for i, t in enumerate(input_ids)]
            if top := body.get("top_logprobs_num"):
                meta["output_top_logprobs"] = [[self._entry(self.logprob(weights, start + i), t, with_text)][:top]
                                               for i, t in enumerate(out)]
        answer = {"output_ids": list(out), "meta_info": meta}
        return answer if self.skip_tokenizer_init else {"text": self.tokenizer.decode(out, skip_special_tokens=True),
                                                        **answer}

    async def _events(self, body: dict[str, Any], rid: str, input_ids: list[int], out: list[int],
                      finish: dict[str, Any], weights: str, abort: tuple[str, int] | None) -> AsyncIterator[bytes]:
        self.running += 1
        try:
            stop = 1 if abort is not None else len(out)
            for k in range(1, stop + 1):
                end = k == stop
                reason = (self._abort(abort) if abort is not None else finish) if end else None
                state = (self._state(body, rid, input_ids, out[k - 1:k], weights, reason, start=k - 1)
                         if self.incremental else self._state(body, rid, input_ids, out[:k], weights, reason))
                yield b"data: " + orjson.dumps(state) + b"\n\n"
                await asyncio.sleep(0)
            yield b"data: [DONE]\n\n"
        finally:
            self.running -= 1

    async def model_info(self, request: Request) -> JSONResponse:
        return JSONResponse({"model_path": MODEL_PATH, "tokenizer_path": MODEL_PATH, "is_generation": True,
                             "preferred_sampling_params": None, "weight_version": "default"})

    async def health(self, request: Request) -> Response:
        return Response(status_code=200)

    def _lora_result(self, success: bool, message: str | None = None) -> JSONResponse:
        return JSONResponse({"success": success, "error_message": message, "loaded_adapters": dict(self.adapters)},
                            status_code=200 if success else 400)

    async def load_lora(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.lora_calls.append(("load", body))
        name, path = body.get("lora_name"), body.get("lora_path")
        if not self.enable_lora:
            return self._lora_result(False, "LoRA is not enabled. Please set `--enable-lora` to enable LoRA.")
        if name in self.adapters:
            return self._lora_result(False, f"Failed to load LoRA adapter {name} because it is already loaded")
        if not path or not (Path(path) / "adapter_config.json").is_file():
            return self._lora_result(False, f"Can't find 'adapter_config.json' at '{path}'")
        self.adapters[name] = path
        return self._lora_result(True)

    async def unload_lora(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.lora_calls.append(("unload", body))
        name = body.get("lora_name")
        if name not in self.adapters:
            return self._lora_result(False, f"LoRA adapter {name} is not loaded")
        del self.adapters[name]
        return self._lora_result(True)

    async def flush_cache(self, request: Request) -> Response:
        if self.running:
            return PlainTextResponse("Cache not flushed: there are running or waiting requests.\n", status_code=400)
        self.flushes += 1
        return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details. (When there are running "
                                 "or waiting requests, the operation will not be performed.)\n")
