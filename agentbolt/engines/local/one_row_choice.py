"""Run a one-row decode step on one thread or split across two, whichever has been faster.

Why choose at run time: the two-way step (:class:`.two_way.TwoWayOneRowStep`) is faster
only while a second core is free. Its threads meet twice per layer, and on a machine whose
cores are taken by other processes each meeting waits for the partner thread to be
scheduled again; then the step on one thread is as fast and costs less CPU. So both run:
the one last measured faster, and every ``probe_every``-th step the other, and each keeps
a moving average of its wall time per step (the choice follows the machine's load).
The step on one thread runs its ops on one intra-op thread: at one row torch's
parallel regions cost more than they give.

Both steps compute the same logits (to rounding) and write the same K/V, so which one
runs a given step does not change what is served.
"""

from __future__ import annotations

import time

import torch

from agentbolt.engines.local.one_row import OneRowStep
from agentbolt.engines.local.two_way import TwoWayOneRowStep

__all__ = ["FasterOneRowStep"]


class FasterOneRowStep:
    """``one`` or ``two``, whichever step has the lower moving average of wall time."""

    def __init__(self, one: OneRowStep, two: TwoWayOneRowStep, *, probe_every: int = 16,
                 weight: float = 0.25) -> None:
        self.one, self.two = one, two
        self.probe_every = probe_every
        self.weight = weight  # of the newest step in the moving average
        self.seconds: dict[bool, float | None] = {False: None, True: None}  # by "split"
        self.runs = {False: 0, True: 0}
        self.steps = 0

    def __call__(self, token: int, length: int, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        split = self._pick()
        start = time.perf_counter()
        if split:
            logits = self.two(token, length, k, v)
        else:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                logits = self.one(token, length, k, v)
            finally:
                torch.set_num_threads(threads)
        took = time.perf_counter() - start
        self.runs[split] += 1
        if self.runs[split] > 1:  # the first run lays out the weight copies (and starts the worker)
            last = self.seconds[split]
            self.seconds[split] = took if last is None else last + self.weight * (took - last)
        return logits

    def _pick(self) -> bool:
        """Whether this step runs split: the faster on average, the other every ``probe_every``-th
        step (first each until it has a time: its first run is not counted)."""
        self.steps += 1
        one, two = self.seconds[False], self.seconds[True]
        if two is None:
            return True
        if one is None:
            return False
        faster = two < one
        return faster if self.steps % self.probe_every else not faster

    def close(self) -> None:
        """Stop the two-way step's worker thread."""
        self.two.close()
