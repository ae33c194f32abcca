"""KV of token-id prefixes already computed, so a prompt that starts with them is not
prefilled again.

Two cases make this pay in RL: the rollouts of a GRPO group send the same prompt, and an
agent's next call starts with its previous prompt + the tokens the engine sampled (the
gateway builds it token-exact). Entries are keyed by their token ids; a lookup returns the
longest stored prefix of the new prompt (a prefix of an entry counts: attention is causal,
so the KV of its first n positions is the KV of those n tokens alone).

Entries hold KV computed by the weights being served, so the scheduler clears the cache
at every weight swap. Memory is bounded by ``budget_tokens`` (least recently used first out).
"""

from __future__ import annotations

from collections import OrderedDict

import torch

__all__ = ["PrefixCache"]


class PrefixCache:
    def __init__(self, budget_tokens: int) -> None:
        self.budget_tokens = budget_tokens
        self._entries: OrderedDict[tuple[int, ...], torch.Tensor] = OrderedDict()
        self._tokens = 0
        self.hits = 0
        self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, ids: list[int], limit: int) -> tuple[int, torch.Tensor | None]:
        """The longest cached prefix of ``ids``, at most ``limit`` tokens: ``(length, kv)``."""
        best, best_kv, best_key = 0, None, None
        if limit <= 0:
            return 0, None
        for key, kv in self._entries.items():
            if key[0] != ids[0] or len(key) <= best:
                continue
            n = _common(key, ids, min(limit, len(key)))
            if n > best:
                best, best_kv, best_key = n, kv, key
        if best_key is not None:
            self._entries.move_to_end(best_key)
            self.hits += 1
            self.reused_tokens += best
        return best, best_kv

    def put(self, ids: list[int], kv: torch.Tensor) -> None:
        """Store the KV of ``ids`` (``kv`` covers at least ``len(ids)`` positions on dim 3)."""
        n = len(ids)
        if n == 0 or n > self.budget_tokens:
            return
        key = tuple(ids)
        if key in self._entries:
            self._entries.move_to_end(key)
            return
        for other in list(self._entries):  # an entry that is a prefix of this one is now redundant
            if len(other) < n and key[: len(other)] == other:
                self._drop(other)
        self._entries[key] = kv[:, :, :, :n]
        self._tokens += n
        while self._tokens > self.budget_tokens:
            self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def _drop(self, key: tuple[int, ...]) -> None:
        del self._entries[key]
        self._tokens -= len(key)


def _common(a: tuple[int, ...], b: list[int], limit: int) -> int:
    n = 0
    while n < limit and a[n] == b[n]:
        n += 1
    return n
