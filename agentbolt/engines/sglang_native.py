"""SGLang's native ``/generate`` route in the OpenAI completions terms the engines speak.

An OpenAI completions body becomes a ``/generate`` request (:func:`generate_request`):
``prompt`` token ids go as ``input_ids`` (a text prompt as ``text``, its ids then read
back from the engine's ``input_token_logprobs``), the sampling fields into
``sampling_params`` under SGLang's names (``max_tokens`` → ``max_new_tokens``, sent as
``null`` when the call sets no limit: SGLang then gives all the room the context leaves,
where leaving it out would mean 128), ``return_logprob: true`` always (the sampled ids and
their logprobs are ``meta_info.output_token_logprobs``, entries ``[logprob, token_id,
text]``), the served LoRA by name as ``lora_path``.

The answer becomes a completion in vLLM's format (:func:`completion_of`): top-level
``prompt_token_ids``, ``choices[0].token_ids`` (SGLang's ``output_ids``), completions
logprobs (``tokens``, ``token_logprobs``, ``top_logprobs``), ``finish_reason`` from
``meta_info.finish_reason.type``. Streams (:class:`GenerateStream`) come as ``data:``
events holding the output so far (SGLang's default) or only what is new
(``--incremental-streaming-output``): which one is read from ``meta_info.completion_tokens``,
and each becomes a completion chunk with its new text, ids and logprobs. A server started
with ``--skip-tokenizer-init`` sends ids without text: the text is then the served
model's tokenizer's reading of SGLang's ids (:class:`Detokenizer`; the ids stay SGLang's).

Errors (:func:`error_of`): SGLang answers ``{"error": {"message": ...}}`` (400 for a bad
request), FastAPI's ``{"message": ..., "code": ...}`` for an ``HTTPException`` (an abort
with 500/503), ``{"success": false, "error_message": ...}`` from its control routes; an
aborted request is also a ``finish_reason`` of type ``abort`` (with its ``status_code``
in newer versions) — each becomes an :class:`EngineError` with that status (500 when it
says none), so a 503 takes a replica out and other 5xx are retried by the gateway.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from agentbolt.engines.engine import EngineError

__all__ = ["Detokenizer", "GenerateStream", "completion_of", "error_of", "generate_request"]

#: OpenAI completions field -> SGLang ``sampling_params`` field
_SAMPLING = {
    "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
    "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
    "repetition_penalty": "repetition_penalty", "stop": "stop", "stop_token_ids": "stop_token_ids",
    "ignore_eos": "ignore_eos", "min_tokens": "min_new_tokens", "logit_bias": "logit_bias", "seed": "sampling_seed",
}


def generate_request(body: dict[str, Any], *, lora: str | None, max_tokens: int | None) -> dict[str, Any]:
    """The ``/generate`` request for an OpenAI completions ``body`` (``lora``: the name of
    the loaded LoRA to answer with; ``max_tokens``: the limit of a call that sets none).
    Raises EngineError(400) for what one SGLang call cannot answer."""
    for field, value in (("n", body.get("n")), ("best_of", body.get("best_of"))):
        if value not in (None, 1):
            raise EngineError(400, f"the sglang engine samples one answer per call: {field}={value} is not "
                                   "supported; send several calls")
    for field in ("echo", "suffix"):
        if body.get(field):
            raise EngineError(400, f"the sglang engine does not support {field}= on completions")
    request: dict[str, Any] = {}
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (list, str)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        request["input_ids"] = prompt
    elif isinstance(prompt, str) and prompt:
        request["text"] = prompt
        request["logprob_start_len"] = 0  # the prompt's ids, as SGLang tokenized it, come back with its logprobs
    else:
        raise EngineError(400, "prompt must be token ids or one text (one prompt per call)")
    limit = body.get("max_tokens")
    if limit is None:
        limit = body.get("max_completion_tokens")
    sampling: dict[str, Any] = {"max_new_tokens": limit if limit is not None else max_tokens}
    sampling.update({native: body[field] for field, native in _SAMPLING.items() if body.get(field) is not None})
    request["sampling_params"] = sampling
    request["return_logprob"] = True
    request["return_text_in_logprobs"] = True
    top = body.get("logprobs")
    if isinstance(top, int) and not isinstance(top, bool) and top > 0:
        request["top_logprobs_num"] = top
    if lora is not None:
        request["lora_path"] = lora
    if body.get("stream"):
        request["stream"] = True
    return request


def _finish(reason: Any, where: str) -> str | None:
    """The OpenAI ``finish_reason`` of SGLang's ``meta_info.finish_reason`` (None: still
    running); an abort raises its EngineError."""
    if not isinstance(reason, dict):
        return None
    kind = reason.get("type")
    if kind == "abort":
        status = reason.get("status_code")
        code = status if isinstance(status, int) and 400 <= status < 600 else 500
        raise EngineError(code, f"SGLang at {where} aborted the call: {reason.get('message') or 'no reason given'}")
    return "length" if kind == "length" else "stop"


def _ids_of(entries: Any) -> list[int]:
    return [int(e[1]) for e in entries or () if isinstance(e, list) and len(e) >= 2]


class Detokenizer:
    """The text of SGLang's token ids where its answer has none, with the served model's
    ``tokenizer``: a logprob entry's token, or an answer's text (``--skip-tokenizer-init``;
    special tokens left out, as SGLang's own text leaves them)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def token(self, token_id: int) -> str:
        return str(self.tokenizer.decode([token_id], skip_special_tokens=False))

    def text(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))


class _Logprobs:
    """Completions logprobs from SGLang's ``[logprob, token_id, text]`` entries."""

    def __init__(self, detokenizer: Detokenizer, top: int) -> None:
        self.detokenizer = detokenizer
        self.top = top

    def text(self, entry: list[Any]) -> str:
        return entry[2] if len(entry) > 2 and isinstance(entry[2], str) else self.detokenizer.token(int(entry[1]))

    def of(self, chosen: list[Any], tops: list[Any] | None) -> dict[str, Any]:
        tokens = [self.text(e) for e in chosen]
        out: dict[str, Any] = {"tokens": tokens, "token_logprobs": [e[0] for e in chosen]}
        if self.top > 0:
            rows = tops or [[] for _ in chosen]
            out["top_logprobs"] = [{self.text(e): e[0] for e in row if isinstance(e, list)} for row in rows]
        else:
            out["top_logprobs"] = None
        return out


def _answer_ids(answer: dict[str, Any], meta: dict[str, Any]) -> list[int]:
    ids = answer.get("output_ids")
    if isinstance(ids, list) and all(isinstance(t, int) for t in ids):
        return ids
    return _ids_of(meta.get("output_token_logprobs"))  # versions that send no output_ids


def completion_of(answer: dict[str, Any], request: dict[str, Any], body: dict[str, Any], *, model: str | None,
                  detokenizer: Detokenizer, where: str) -> dict[str, Any]:
    """The OpenAI completion (vLLM's format) for SGLang's non-streaming ``answer`` to
    ``request`` (made from ``body``)."""
    meta = answer.get("meta_info")
    if not isinstance(meta, dict):
        raise EngineError(502, f"SGLang at {where} sent an answer without meta_info: {str(answer)[:300]}")
    finish = _finish(meta.get("finish_reason"), where)
    ids = _answer_ids(answer, meta)
    prompt_ids = request.get("input_ids") or _ids_of(meta.get("input_token_logprobs"))
    text = answer["text"] if isinstance(answer.get("text"), str) else detokenizer.text(ids)
    choice: dict[str, Any] = {"index": 0, "text": text, "token_ids": ids, "finish_reason": finish, "logprobs": None}
    reason = meta.get("finish_reason")
    if isinstance(reason, dict) and reason.get("type") == "stop" and reason.get("matched") is not None:
        choice["stop_reason"] = reason["matched"]
    if body.get("logprobs") is not None:
        chosen = [e for e in meta.get("output_token_logprobs") or () if isinstance(e, list)]
        choice["logprobs"] = _Logprobs(detokenizer, int(body["logprobs"])).of(chosen, meta.get("output_top_logprobs"))
    counted = meta.get("prompt_tokens")
    prompt_n = counted if isinstance(counted, int) else len(prompt_ids)
    return {
        "id": f"cmpl-{meta.get('id') or uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
        "model": model, "choices": [choice], "prompt_token_ids": prompt_ids,
        "usage": {"prompt_tokens": prompt_n, "completion_tokens": len(ids), "total_tokens": prompt_n + len(ids)},
    }


class GenerateStream:
    """SGLang's streamed ``/generate`` events as OpenAI completion chunks (see the module
    doc): :meth:`chunk` for each event, :meth:`usage` for the closing usage chunk."""

    def __init__(self, request: dict[str, Any], body: dict[str, Any], *, model: str | None,
                 detokenizer: Detokenizer, where: str) -> None:
        self.prompt_ids: list[int] | None = request.get("input_ids")
        self.want_logprobs = body.get("logprobs") is not None
        self.detokenizer = detokenizer
        self.logprobs = _Logprobs(detokenizer, int(body.get("logprobs") or 0))
        self.ids: list[int] = []  # every id so far
        self.where = where
        self.base = {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                     "model": model}
        self.text = ""  # text sent so far
        self.prompt_n = 0
        self._first = True

    def chunk(self, event: dict[str, Any]) -> dict[str, Any]:
        """The completion chunk for one ``data:`` event (raises for an error or an abort)."""
        meta = event.get("meta_info")
        if not isinstance(meta, dict):
            raise error_of_event(event, self.where)
        finish = _finish(meta.get("finish_reason"), self.where)
        total = meta.get("completion_tokens")
        ids = _answer_ids(event, meta)
        n = len(self.ids)  # tokens sent so far
        cumulative = isinstance(total, int) and len(ids) == total and total >= n
        new_ids = ids[n:] if cumulative else ids
        entries = [e for e in meta.get("output_token_logprobs") or () if isinstance(e, list)]
        new_entries = entries[n:] if cumulative and len(entries) == total else entries
        tops = meta.get("output_top_logprobs")
        if isinstance(tops, list) and cumulative and len(tops) == total:
            tops = tops[n:]
        self.ids += new_ids
        delta = self._new_text(event, cumulative, finish is not None)
        if isinstance(meta.get("prompt_tokens"), int):
            self.prompt_n = meta["prompt_tokens"]
        choice: dict[str, Any] = {"index": 0, "text": delta, "token_ids": new_ids, "finish_reason": finish,
                                  "logprobs": self.logprobs.of(new_entries, tops) if self.want_logprobs else None}
        out: dict[str, Any] = {**self.base, "choices": [choice]}
        if self._first:
            self._first = False
            if self.prompt_ids is None:
                self.prompt_ids = _ids_of(meta.get("input_token_logprobs"))
            out["prompt_token_ids"] = self.prompt_ids
        return out

    def _new_text(self, event: dict[str, Any], cumulative: bool, finished: bool) -> str:
        """The text ``event`` adds to what was sent (its own, or read from the ids so far
        when it has none: an unfinished character waits for its next bytes)."""
        if "text" not in event:  # --skip-tokenizer-init: ids only
            full = self.detokenizer.text(self.ids)
            raw: Any = full if finished else full.rstrip("\ufffd")
            cumulative = True
        else:
            raw = event["text"]
        text = raw if isinstance(raw, str) else ""
        if not cumulative:
            self.text += text
            return text
        if not text.startswith(self.text):  # text already sent cannot change; wait until it agrees again
            return ""
        delta, self.text = text[len(self.text):], text
        return delta

    def usage(self) -> dict[str, Any]:
        n = self.prompt_n or len(self.prompt_ids or ())
        return {**self.base, "choices": [],
                "usage": {"prompt_tokens": n, "completion_tokens": len(self.ids), "total_tokens": n + len(self.ids)}}


def _message_of(body: Any) -> tuple[str | None, int | None]:
    """The message (and status code, where one is given) in an SGLang error body."""
    if not isinstance(body, dict):
        return None, None
    err = body.get("error")
    if isinstance(err, dict):
        code = err.get("code")
        return (str(err.get("message")) if err.get("message") is not None else None,
                code if isinstance(code, int) and 400 <= code < 600 else None)
    if isinstance(err, str):
        return err, None
    for key in ("message", "error_message", "detail"):
        if isinstance(body.get(key), str):
            return body[key], None
    return None, None


def error_of(status: int, content: bytes, where: str) -> EngineError:
    """The EngineError for SGLang's HTTP error answer (``content``, status ``status``)."""
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        body = None
    message, _ = _message_of(body)
    if message is None:
        message = f"SGLang at {where} answered HTTP {status}: {content[:500].decode('utf-8', 'replace')}"
    return EngineError(status, message)


def error_of_event(event: dict[str, Any], where: str) -> EngineError:
    """The EngineError for a streamed error event (its ``code``, else 400: SGLang streams
    the refusal of a bad request this way)."""
    message, code = _message_of(event)
    return EngineError(code or 400, message or f"SGLang at {where} streamed an event without output: "
                                               f"{str(event)[:300]}")
