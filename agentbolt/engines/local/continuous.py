"""Continuous batching with prefix reuse for Llama-shaped models (see :mod:`.llama_forward`).

One worker thread runs forward passes back to back. Before each pass it admits queued
requests into free rows (up to ``max_batch_size`` rows), so a request joins the running
batch at the next step and a finished row frees its place at once; the pass decodes one
token for every running row and prefills the new rows' prompts in the same weight pass.

Prefill work is skipped where it was done before:

* requests admitted together with the same prompt (a GRPO group) prefill it once; the
  others copy its KV and sample from the same logits, each with its own RNG;
* a prompt that starts with a cached prefix (an earlier prompt, or an earlier prompt +
  the answer sampled for it) prefills only the rest (:class:`.prefix_cache.PrefixCache`).

Logits are computed only where a token is sampled. Weight swaps wait until the running
rows finish (new requests are held meanwhile), so every answer comes from one policy
version; the prefix cache is emptied at each swap. Lifecycle, events and the per-token
bookkeeping are :class:`.scheduler.BatchScheduler` 's.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import torch

from agentbolt.engines.local.llama_forward import RaggedLlama, Step
from agentbolt.engines.local.prefix_cache import PrefixCache
from agentbolt.engines.local.sampling import choose_tokens, new_generator
from agentbolt.engines.local.scheduler import _STOP, _WAKE, BatchScheduler, GenRequest

__all__ = ["ContinuousScheduler"]


@dataclass
class _Row:
    req: GenRequest
    gen: torch.Generator
    length: int  # positions cached in this row's slot
    next_token: int  # sampled, not yet in the cache


class ContinuousScheduler(BatchScheduler):
    """:class:`BatchScheduler` 's interface, batching at every step (Llama-shaped models only).

    ``prefill_tokens_per_step`` bounds the prompt tokens admitted into one pass (at least
    one request is always admitted); ``prefix_cache_tokens`` bounds the cached prefixes.
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, *, max_batch_size: int, batch_window_s: float,
                 device: torch.device, eos_ids: set[int], pad_id: int, num_threads: int | None = None,
                 max_len: int = 2048, prefix_cache_tokens: int = 8192, prefill_tokens_per_step: int = 2048) -> None:
        super().__init__(model, tokenizer, max_batch_size=max_batch_size, batch_window_s=batch_window_s,
                         device=device, eos_ids=eos_ids, pad_id=pad_id, num_threads=num_threads)
        self.runner = RaggedLlama(model, slots=max_batch_size, max_len=max_len, device=device)
        self.prefix = PrefixCache(prefix_cache_tokens)
        self.prefill_tokens_per_step = prefill_tokens_per_step
        self._pending: deque[GenRequest] = deque()
        self._rows: list[_Row] = []  # row i lives in KV slot i

    # ---- worker ----------------------------------------------------------------------------
    def _run(self) -> None:
        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        stopping = False
        while True:
            if not self._rows and not self._pending:
                if stopping:
                    self._shut_down()
                    return
                stopping = self._take(self._inbox.get())
                deadline = time.monotonic() + self.batch_window_s
                while not stopping and len(self._pending) < self.max_batch_size:
                    remaining = deadline - time.monotonic()
                    try:
                        item = self._inbox.get(timeout=remaining) if remaining > 0 else self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    stopping = self._take(item)
            while not stopping:
                try:
                    stopping = self._take(self._inbox.get_nowait())
                except queue.Empty:
                    break
            with self._swap_lock:
                swap_waiting = bool(self._swaps)
            if swap_waiting and not self._rows:
                self._apply_swaps()
                self.prefix.clear()
            admit = [] if swap_waiting else self._admissible()
            if self.refuse_if_incomplete(admit):
                admit = []
            if not self._rows and not admit:
                continue
            try:
                with torch.inference_mode():
                    self._step(admit)
            except BaseException as exc:  # noqa: BLE001 - every caller must hear about it
                for r in [row.req for row in self._rows] + admit:
                    r.send(exc)
                self._rows = []

    def _take(self, item: Any) -> bool:
        """File one inbox item; True when it asks the worker to stop."""
        if item is _STOP:
            return True
        if item is not _WAKE:
            self._pending.append(item)
        return False

    def _shut_down(self) -> None:
        super()._shut_down()
        self.prefix.clear()

    def _admissible(self) -> list[GenRequest]:
        admit: list[GenRequest] = []
        budget = self.prefill_tokens_per_step
        while self._pending and len(self._rows) + len(admit) < self.max_batch_size:
            req = self._pending[0]
            if req.cancelled:
                self._pending.popleft()
                continue
            if admit and len(req.prompt_ids) > budget:
                break
            budget -= len(req.prompt_ids)
            admit.append(self._pending.popleft())
        return admit

    def _step(self, admit: list[GenRequest]) -> None:
        version = self.policy_version
        d = len(self._rows)
        unique: list[GenRequest] = []
        copies: list[tuple[GenRequest, int]] = []  # (request, index in unique of the same prompt)
        first: dict[tuple[int, ...], int] = {}
        for req in admit:
            key = tuple(req.prompt_ids)
            if key in first:
                copies.append((req, first[key]))
            else:
                first[key] = len(unique)
                unique.append(req)
        starts: list[int] = []
        for j, req in enumerate(unique):
            n, kv = self.prefix.lookup(req.prompt_ids, len(req.prompt_ids) - 1)
            if kv is not None:
                self.runner.write(d + j, kv, n)
            starts.append(n)
        step = Step([row.next_token for row in self._rows], [row.length for row in self._rows],
                    [req.prompt_ids[s:] for req, s in zip(unique, starts, strict=True)], starts)
        logits = self.runner.forward(step)
        self.stats.forward_passes += 1
        if admit:
            self.stats.batch_sizes.append(len(admit))
            self.stats.prompt_tokens_computed += sum(len(r.prompt_ids) - s for r, s in zip(unique, starts, strict=True))
            self.stats.prompt_tokens_reused += sum(starts) + sum(len(r.prompt_ids) for r, _ in copies)
        for j, req in enumerate(unique):
            self.prefix.put(req.prompt_ids, self.runner.read(d + j, len(req.prompt_ids)))
        p = len(unique)
        for c, (req, j) in enumerate(copies):
            self.runner.move(d + j, d + p + c, len(req.prompt_ids))
        if copies:
            logits = logits[torch.tensor(list(range(d + p)) + [d + j for _, j in copies], device=logits.device)]
        rows = self._rows + [_Row(req, new_generator(req.params.seed, self.device), len(req.prompt_ids), -1)
                             for req in unique + [c[0] for c in copies]]
        for row in rows[:d]:
            row.length += 1
        self._sample(rows, logits, version)

    def _sample(self, rows: list[_Row], logits: torch.Tensor, version: int) -> None:
        tokens, chosen, raw = choose_tokens(logits, [r.req.params for r in rows], [r.gen for r in rows])
        want_top = max(r.req.params.top_logprobs for r in rows)
        top_vals = top_ids = None
        if want_top:
            values, ids = torch.topk(raw, want_top, dim=-1)
            top_vals, top_ids = values.tolist(), ids.tolist()
        tok_list, lp_list = tokens.tolist(), chosen.tolist()
        survivors: list[_Row] = []
        for j, row in enumerate(rows):
            k = row.req.params.top_logprobs
            top = list(zip(top_ids[j][:k], top_vals[j][:k], strict=True)) if top_ids and top_vals and k else []
            was_cancelled = row.req.cancelled
            if self._advance(row.req, tok_list[j], lp_list[j], top, version):
                if not was_cancelled:  # its prompt + answer may be the start of its next call
                    self.prefix.put(row.req.prompt_ids + row.req.token_ids[:-1], self.runner.read(j, row.length))
                continue
            row.next_token = tok_list[j]
            if j != len(survivors):  # keep the running rows in slots 0..n-1
                self.runner.move(j, len(survivors), row.length)
            survivors.append(row)
        self.stats.tokens_generated += len(rows)
        self._rows = survivors
