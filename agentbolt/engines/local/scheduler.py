"""Dynamic batching for a Hugging Face causal LM: one worker thread, many requests.

Requests that arrive within ``batch_window_s`` of the first one, or while a batch is
running, form the next batch (up to ``max_batch_size`` rows). A batch is left-padded,
prefilled in one forward pass, then decoded step by step with a shared KV cache: every
step is ONE forward pass for all rows, each row sampled with its own temperature /
top-p / seed. Rows that finish (EOS, stop, max_tokens, client gone) leave the batch and
the cache. Weight swaps run between batches, so each response comes from one policy
version; queued requests wait for the swap. An update in parts (swaps with
``commit=False``) leaves the weights partly new until its commit: meanwhile every request
is answered 503.

The worker talks to asyncio callers through ``loop.call_soon_threadsafe``: each request
gets a :class:`TokenEvent` per generated token and a final :class:`DoneEvent` (or an
exception).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from agentbolt.engines.engine import EngineError
from agentbolt.engines.local.sampling import (
    SamplingParams,
    choose_tokens,
    new_generator,
)

__all__ = ["BatchScheduler", "DoneEvent", "EngineStats", "GenRequest", "TokenEvent", "incomplete_error"]


@dataclass
class TokenEvent:
    token_id: int
    logprob: float
    top: list[tuple[int, float]]
    text: str  # new text now safe to show (may be empty: held back for stop strings / partial UTF-8)


@dataclass
class DoneEvent:
    finish_reason: str  # "stop" | "length"
    text: str  # the last bit of text
    policy_version: int


@dataclass
class GenRequest:
    """One generation, owned by an asyncio caller; the worker fills it."""

    prompt_ids: list[int]
    params: SamplingParams
    loop: asyncio.AbstractEventLoop | None = None  # set by the caller before submitting
    events: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    cancelled: bool = False
    token_ids: list[int] = field(default_factory=list)
    emitted: int = 0  # characters of text already sent

    def send(self, event: Any) -> None:
        if self.loop is None:
            self.cancelled = True
            return
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the caller's loop is closed: nobody listens
            self.cancelled = True


@dataclass
class EngineStats:
    """Counters that show batching at work."""

    forward_passes: int = 0
    batch_sizes: list[int] = field(default_factory=list)  # rows per batch, at prefill
    tokens_generated: int = 0
    prompt_tokens_computed: int = 0  # prompt positions run through the model
    prompt_tokens_reused: int = 0  # prompt positions whose K/V came from an earlier computation


def incomplete_error(version: int | None) -> EngineError:
    """What an engine whose weights are partly updated answers every call."""
    return EngineError(503, f"this engine's weights are partly updated: an update sent in parts loaded some over "
                            f"policy version {version} and was not committed, so it answers no call until an update "
                            "completes; publish the weights again (a resumed training run does so first)")


_STOP = object()
_WAKE = object()


class BatchScheduler:
    def __init__(self, model: torch.nn.Module, tokenizer: Any, *, max_batch_size: int, batch_window_s: float,
                 device: torch.device, eos_ids: set[int], pad_id: int, num_threads: int | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_s
        self.device = device
        self.eos_ids = eos_ids
        self.pad_id = pad_id
        self.num_threads = num_threads
        self.policy_version = 0
        # transformers 5.x renamed ``past_key_values`` to ``cache``; accept both
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.stats = EngineStats()
        self._inbox: queue.Queue[Any] = queue.Queue()
        self.incomplete = False
        """Parts of an update were loaded and not committed (:meth:`swap` with ``commit=False``):
        the worker answers no request until a committed swap."""
        self._swaps: list[tuple[Callable[[], None], int | None, bool, concurrent.futures.Future[int]]] = []
        self._swap_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="agentbolt-transformers-engine", daemon=True)
                self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._inbox.put(_STOP)
            thread.join(timeout)
        self._thread = None

    # ---- API used by the engine ------------------------------------------------------------
    def submit(self, request: GenRequest) -> None:
        self.start()
        self._inbox.put(request)

    def swap(self, apply: Callable[[], None], version: int | None, *,
             commit: bool = True) -> concurrent.futures.Future[int]:
        """Run ``apply`` in the worker between batches, then bump the version; the future
        resolves to the new version. ``commit=False``: one part of an update in several —
        the version stays, and the worker answers no request (503) until a committed swap."""
        fut: concurrent.futures.Future[int] = concurrent.futures.Future()
        with self._swap_lock:
            self._swaps.append((apply, version, commit, fut))
        self.start()
        self._inbox.put(_WAKE)
        return fut

    # ---- worker ----------------------------------------------------------------------------
    def _apply_swaps(self) -> None:
        with self._swap_lock:
            swaps, self._swaps = self._swaps, []
        for apply, version, commit, fut in swaps:
            try:
                apply()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                fut.set_exception(exc)
                continue
            if commit:
                self.policy_version = version if version is not None else self.policy_version + 1
            self.incomplete = not commit
            fut.set_result(self.policy_version)

    def refuse_if_incomplete(self, requests: list[GenRequest]) -> bool:
        """While the weights are partly updated, answer ``requests`` with a 503; whether it did."""
        if not self.incomplete:
            return False
        for r in requests:
            r.send(incomplete_error(self.policy_version))
        return True

    def _run(self) -> None:
        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        while True:
            item = self._inbox.get()
            if item is _STOP:
                self._shut_down()
                return
            self._apply_swaps()
            if item is _WAKE:
                continue
            batch: list[GenRequest] = [item]
            deadline = time.monotonic() + self.batch_window_s
            stop_after = False
            while len(batch) < self.max_batch_size:
                remaining = deadline - time.monotonic()
                try:
                    nxt = self._inbox.get(timeout=remaining) if remaining > 0 else self._inbox.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop_after = True
                    break
                if nxt is not _WAKE:
                    batch.append(nxt)
            self._apply_swaps()  # a swap that arrived during the window goes first
            batch = [r for r in batch if not r.cancelled]
            if batch and not self.refuse_if_incomplete(batch):
                try:
                    with torch.inference_mode():
                        self._generate(batch)
                except BaseException as exc:  # noqa: BLE001 - every caller must hear about it
                    for r in batch:
                        r.send(exc)
            if stop_after:
                self._shut_down()
                return

    def _shut_down(self) -> None:
        """Finish pending swaps; tell requests still queued that the engine closed."""
        self._apply_swaps()
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, GenRequest):
                item.send(EngineError(503, "the transformers engine was closed before this request ran; retry"))

    def _generate(self, batch: list[GenRequest]) -> None:
        version = self.policy_version
        self.stats.batch_sizes.append(len(batch))
        self.stats.prompt_tokens_computed += sum(len(r.prompt_ids) for r in batch)
        width = max(len(r.prompt_ids) for r in batch)
        ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, r in enumerate(batch):
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[i, width - len(r.prompt_ids):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        gens = [new_generator(r.params.seed, self.device) for r in batch]
        rows = list(range(len(batch)))  # batch index of each row still in the cache
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
        self.stats.forward_passes += 1
        cache = out.cache if self._cache_arg == "cache" else out.past_key_values
        last_pos = positions[:, -1]
        want_top = max(r.params.top_logprobs for r in batch)
        while True:
            logits = out.logits[:, -1, :].float()
            tokens, chosen, raw = choose_tokens(logits, [batch[i].params for i in rows], [gens[i] for i in rows])
            top_vals: list[Any] | None = None
            top_ids: list[Any] | None = None
            if want_top:
                values, ids = torch.topk(raw, want_top, dim=-1)
                top_vals, top_ids = values.tolist(), ids.tolist()
            tok_list, lp_list = tokens.tolist(), chosen.tolist()
            keep: list[int] = []
            for j, i in enumerate(rows):
                r = batch[i]
                top = []
                if top_ids is not None and top_vals is not None and r.params.top_logprobs:
                    k = r.params.top_logprobs
                    top = list(zip(top_ids[j][:k], top_vals[j][:k], strict=True))
                if not self._advance(r, tok_list[j], lp_list[j], top, version):
                    keep.append(j)
            self.stats.tokens_generated += len(rows)
            if not keep:
                return
            if len(keep) < len(rows):
                idx = torch.tensor(keep, device=self.device)
                cache.batch_select_indices(idx)
                mask, last_pos, tokens = mask[idx], last_pos[idx], tokens[idx]
                rows = [rows[j] for j in keep]
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], dim=1)
            last_pos = last_pos + 1
            out = self.model(input_ids=tokens.unsqueeze(1), attention_mask=mask, position_ids=last_pos.unsqueeze(1),
                             use_cache=True, **{self._cache_arg: cache})
            self.stats.forward_passes += 1

    def _advance(self, r: GenRequest, token: int, logprob: float, top: list[tuple[int, float]], version: int) -> bool:
        """Record one token for ``r``; send events; return True when ``r`` is finished."""
        if r.cancelled:
            return True
        p = r.params
        r.token_ids.append(token)
        finish: str | None = None
        if (token in self.eos_ids and not p.ignore_eos) or token in p.stop_token_ids:
            finish = "stop"
        text = self.tokenizer.decode(r.token_ids, skip_special_tokens=True)
        if p.stop:
            start = max(0, r.emitted - max(len(s) for s in p.stop))
            hits = [i for i in (text.find(s, start) for s in p.stop) if i >= 0]
            if hits:
                text, finish = text[: min(hits)], "stop"
        if finish is None and len(r.token_ids) >= p.max_tokens:
            finish = "length"
        if finish is None:
            safe = len(text.rstrip("\ufffd"))  # an incomplete UTF-8 character waits for its next byte
            if p.stop:
                safe = min(safe, len(text) - max(len(s) for s in p.stop) + 1)
            delta = text[r.emitted:safe] if safe > r.emitted else ""
            r.emitted += len(delta)
            r.send(TokenEvent(token, logprob, top, delta))
            return False
        r.send(TokenEvent(token, logprob, top, ""))
        r.send(DoneEvent(finish, text[r.emitted:], version))
        return True
