"""Token sequences → padded tensors, in micro-batches of at most ``max_tokens`` padded tokens.

What every weight-training algorithm batches is a :class:`TokenSequence`: token ids and a
loss mask (1 = trained). SFT's chat records are one; GRPO's samples
(:class:`~agentbolt.adapters.samples.Sample`) are a :class:`RolloutSequence` — also the
rollout they belong to, the engine's logprobs and the rollout's advantage.

* :func:`pad` — right-padded ``[N, T]`` ids, attention and loss masks (:class:`Padded`),
  with the prefix the rows share (:func:`prefix_groups`); :meth:`Padded.labels` gives the
  masked labels of a cross-entropy loss.
* :func:`pack` — units (sequences that belong together) packed into micro-batches whose
  padded size (rows × longest) stays within the budget; a unit bigger than that is split
  between its sequences (a sequence is never cut). SFT's unit is one record.
* :func:`collate` / :func:`micro_batches` — the same for rollouts: a micro-batch carries
  |T_r| of each row's rollout (``rollout_tokens``, counted over the whole batch), so a loss
  that is a mean over rollouts of per-rollout token means gets exactly its share of the
  batch loss in every micro-batch — whether it holds its rollouts whole or a part of one —
  and gradient accumulation adds up to the loss of the whole batch.

Micro-batches follow the order of the sequences, so the rollouts of one task's group —
which start with the same prompt — tend to share one; a prefix common to the rows then
goes through the model once (:func:`shared_prefix`), or once per prefix group when the
rows hold several tasks' prompts (or several agents' system prompts), or samples of one
rollout that share a history before one diverged from the other (:func:`prefix_groups`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol, TypeVar

import torch
from torch import Tensor

from agentbolt.adapters.lineage import common_prefix

__all__ = ["MIN_SHARED_PREFIX", "Padded", "RolloutSequence", "TokenSequence", "TrainBatch", "collate",
           "group_by_rollout", "micro_batches", "pack", "pad", "prefix_groups", "shared_prefix", "trained_tokens"]

class TokenSequence(Protocol):
    """One training sequence: ``token_ids[t]`` is trained when ``loss_mask[t] == 1``."""

    @property
    def token_ids(self) -> Sequence[int]: ...

    @property
    def loss_mask(self) -> Sequence[int]: ...


class RolloutSequence(TokenSequence, Protocol):
    """A sequence a rollout's model calls became, for a policy-gradient loss."""

    @property
    def rollout_id(self) -> str: ...

    @property
    def logprobs(self) -> Sequence[float]:
        """The sampling engine's logprob of each token (π_old)."""
        ...

    @property
    def advantage(self) -> float: ...

    @property
    def num_response_tokens(self) -> int:
        """The trained tokens (mask 1)."""
        ...


S = TypeVar("S", bound=TokenSequence)
R = TypeVar("R", bound=RolloutSequence)


@dataclass(frozen=True, slots=True)
class Padded:
    """``[N, T]`` right-padded tensors of token sequences for one forward pass."""

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    """float: 1.0 on trained tokens."""
    shared_prefix: int = 0
    """Leading tokens identical in every row (of one prefix group) and trained in none (see :func:`prefix_groups`)."""
    prefix_group: Tensor | None = None
    """``[N]`` ids 0..G−1: rows of one group share their first ``shared_prefix`` tokens; None: all rows do."""

    def labels(self, ignore_index: int = -100) -> Tensor:
        """``input_ids`` where trained, ``ignore_index`` elsewhere (padding included): the
        targets of a cross-entropy loss (-100: PyTorch's and Hugging Face's "no loss")."""
        return torch.where(self.loss_mask.bool(), self.input_ids, torch.full_like(self.input_ids, ignore_index))

    def to(self, device: torch.device) -> Padded:
        return Padded(self.input_ids.to(device), self.attention_mask.to(device), self.loss_mask.to(device),
                      self.shared_prefix, None if self.prefix_group is None else self.prefix_group.to(device))


def pad(sequences: Sequence[TokenSequence], pad_id: int = 0) -> Padded:
    """Right-pad ``sequences`` to their longest length; their prefix groups (:func:`prefix_groups`)."""
    if not sequences:
        raise ValueError("a batch needs at least one sequence")
    T = max(len(s.token_ids) for s in sequences)
    N = len(sequences)
    ids = torch.full((N, T), pad_id, dtype=torch.long)
    attn = torch.zeros((N, T), dtype=torch.long)
    mask = torch.zeros((N, T), dtype=torch.float32)
    for n, s in enumerate(sequences):
        L = len(s.token_ids)
        ids[n, :L] = torch.tensor(s.token_ids, dtype=torch.long)
        attn[n, :L] = 1
        mask[n, :L] = torch.tensor(s.loss_mask, dtype=torch.float32)
    P, group = prefix_groups(sequences)
    return Padded(ids, attn, mask, P, None if group is None else torch.tensor(group, dtype=torch.long))


@dataclass(frozen=True, slots=True)
class TrainBatch:
    """``[N, T]`` right-padded tensors (and ``[N]`` per-sample ones) of rollout sequences for one forward pass."""

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    rollout_index: Tensor
    """0..R_m−1: which of this batch's rollouts each sample belongs to."""
    num_rollouts: int
    rollout_tokens: Tensor | None = None
    """``[N]``: |T_r|, the trained tokens of each row's rollout over the whole batch (None: these rows')."""
    shared_prefix: int = 0
    """Leading tokens identical in every row (of one prefix group) and trained in none (see :func:`prefix_groups`)."""
    prefix_group: Tensor | None = None
    """``[N]`` ids 0..G−1: rows of one group share their first ``shared_prefix`` tokens; None: all rows do."""

    @property
    def num_tokens(self) -> int:
        return int(self.attention_mask.sum())

    def to(self, device: torch.device) -> TrainBatch:
        return TrainBatch(self.input_ids.to(device), self.attention_mask.to(device), self.loss_mask.to(device),
                          self.old_logprobs.to(device), self.advantages.to(device), self.rollout_index.to(device),
                          num_rollouts=self.num_rollouts,
                          rollout_tokens=None if self.rollout_tokens is None else self.rollout_tokens.to(device),
                          shared_prefix=self.shared_prefix,
                          prefix_group=None if self.prefix_group is None else self.prefix_group.to(device))


def collate(samples: Sequence[RolloutSequence], pad_id: int = 0,
            rollout_tokens: Mapping[str, int] | None = None) -> TrainBatch:
    """:func:`pad` ``samples``, with their logprobs, advantages and rollouts. ``rollout_tokens``:
    the trained tokens of each rollout over the whole batch (:func:`trained_tokens`), when
    these samples may hold only part of some rollouts."""
    padded = pad(samples, pad_id)
    old = torch.zeros(padded.input_ids.shape, dtype=torch.float32)
    order: dict[str, int] = {}
    index = []
    for n, s in enumerate(samples):
        old[n, : len(s.token_ids)] = torch.tensor(s.logprobs, dtype=torch.float32)
        index.append(order.setdefault(s.rollout_id, len(order)))
    adv = torch.tensor([s.advantage for s in samples], dtype=torch.float32)
    tokens = None if rollout_tokens is None else torch.tensor([float(rollout_tokens[s.rollout_id]) for s in samples])
    return TrainBatch(padded.input_ids, padded.attention_mask, padded.loss_mask, old, adv,
                      torch.tensor(index, dtype=torch.long), len(order), tokens, padded.shared_prefix,
                      padded.prefix_group)


def trained_tokens(samples: Sequence[RolloutSequence]) -> dict[str, int]:
    """|T_r|: the trained tokens of each rollout, over all its samples."""
    out: dict[str, int] = {}
    for s in samples:
        out[s.rollout_id] = out.get(s.rollout_id, 0) + s.num_response_tokens
    return out


MIN_SHARED_PREFIX = 16
"""Shorter common prefixes are not worth a separate forward pass."""


def shared_prefix(samples: Sequence[TokenSequence]) -> int:
    """P: the rows' first P + 1 tokens are identical and untrained, so the first P can go
    through the model once for all rows (0 when that is not worth it). The samples of one
    task's group share their whole first prompt: the system prompt, few-shot turns, question."""
    if len(samples) < 2:
        return 0
    first = samples[0].token_ids
    lcp = min(len(s.token_ids) for s in samples)
    for s in samples[1:]:
        ids = s.token_ids
        i = 0
        while i < lcp and ids[i] == first[i]:
            i += 1
        lcp = i
    first_trained = min((s.loss_mask.index(1) if 1 in s.loss_mask else len(s.loss_mask)) for s in samples)
    P = min(lcp, first_trained) - 1
    return P if P >= MIN_SHARED_PREFIX else 0


def prefix_groups(samples: Sequence[TokenSequence]) -> tuple[int, list[int] | None]:
    """P and, per row, the id of its prefix group (None: one group of all rows), chosen to
    run the fewest tokens: rows with the same first P + 1 tokens form a group, and P stays
    below every row's first trained token. A group is a task's prompt (the rows of its
    GRPO group) or the history that samples of one rollout share up to where a later one
    diverged (compaction, a rewritten turn: :mod:`agentbolt.adapters.lineage`); the prefix
    every row shares (:func:`shared_prefix`) is the case of one group. (0, None) when no
    choice saves anything.

    Exhaustive over the P that matter: with the rows sorted, the number of groups for a P
    is one more than the sorted neighbours sharing at most P tokens, so the run tokens
    ``total − (N − G(P))·P`` are least at some P = (a neighbours' common prefix) − 1."""
    N = len(samples)
    K = min((_first_trained(s) for s in samples), default=0) - 1
    if N < 2 or K < MIN_SHARED_PREFIX:
        return 0, None
    heads = [tuple(s.token_ids[: K + 1]) for s in samples]
    order = sorted(range(N), key=heads.__getitem__)
    neighbours = [common_prefix(heads[a], heads[b]) for a, b in pairwise(order)]
    total = sum(len(s.token_ids) for s in samples)
    best: tuple[int, int] = (total, 0)
    for P in sorted({n - 1 for n in neighbours if n - 1 >= MIN_SHARED_PREFIX}):
        G = 1 + sum(n <= P for n in neighbours)
        best = min(best, (total - (N - G) * P, P))  # the smaller P on a tie
    P = best[1]
    if P == 0:
        return 0, None
    ids: dict[tuple[int, ...], int] = {}
    group = [ids.setdefault(h[: P + 1], len(ids)) for h in heads]
    return P, None if len(ids) == 1 else group


def _first_trained(sample: TokenSequence) -> int:
    return sample.loss_mask.index(1) if 1 in sample.loss_mask else len(sample.loss_mask)


def group_by_rollout(samples: Sequence[R]) -> list[list[R]]:
    """Samples grouped by rollout, in order of first appearance."""
    groups: dict[str, list[R]] = {}
    for s in samples:
        groups.setdefault(s.rollout_id, []).append(s)
    return list(groups.values())


def micro_batches(samples: Sequence[R], max_tokens: int) -> list[list[R]]:
    """:func:`pack` with a rollout's samples as one unit: whole rollouts when they fit."""
    return pack(group_by_rollout(samples), max_tokens)


def pack(units: Sequence[Sequence[S]], max_tokens: int) -> list[list[S]]:
    """Pack whole units into micro-batches whose padded size (sequences × longest) stays
    within ``max_tokens``; a unit bigger than that is split between its sequences into
    micro-batches of its own (a sequence bigger than that gets one alone)."""
    out: list[list[S]] = []
    current: list[S] = []
    longest = 0
    for unit in units:
        u_longest = max(len(s.token_ids) for s in unit)
        if len(unit) * u_longest > max_tokens:  # too big to keep whole: its own micro-batches
            if current:
                out.append(current)
                current, longest = [], 0
            out.extend(_split(unit, max_tokens))
            continue
        new_longest = max(longest, u_longest)
        if current and (len(current) + len(unit)) * new_longest > max_tokens:
            out.append(current)
            current, new_longest = [], u_longest
        current = current + list(unit)
        longest = new_longest
    if current:
        out.append(current)
    return out


def _split(unit: Sequence[S], max_tokens: int) -> list[list[S]]:
    """Consecutive sequences of one unit, each group's padded size within ``max_tokens``."""
    parts: list[list[S]] = []
    part: list[S] = []
    longest = 0
    for s in unit:
        new_longest = max(longest, len(s.token_ids))
        if part and (len(part) + 1) * new_longest > max_tokens:
            parts.append(part)
            part, new_longest = [], len(s.token_ids)
        part.append(s)
        longest = new_longest
    if part:
        parts.append(part)
    return parts
