"""GRPO's progress, step by step: a bar on a terminal, elsewhere (CI, ``nohup``) one plain
line per step (:class:`~agentbolt.algorithms.progress.ConsoleProgress`), and a log line.

What a step's line shows (:func:`describe_step`) is what moves from step to step —
rollouts, reward, success, KL, clipping, gradient norm, entropy, merge rate, held-out
success, the step's time and the training time so far (evaluations excluded) — and
not the loss, which group-relative advantages keep near 0.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console

from agentbolt.algorithms.progress import ConsoleProgress

__all__ = ["describe_step", "step_progress"]

log = logging.getLogger("agentbolt.algorithms.grpo")


@contextlib.contextmanager
def step_progress(console: Console, total: int, done: int,
                  enabled: bool) -> Iterator[Callable[[int, dict[str, Any]], None]]:
    """A bar on a terminal; elsewhere (CI, nohup) one plain line per step. Yields
    ``advance(step, values)``, to call once each step's metrics are in."""
    with ConsoleProgress(console, "GRPO", total, done=done, unit="step", enabled=enabled) as bar:

        def advance(step: int, values: dict[str, Any]) -> None:
            bar.update(step, describe_step(values), force=True)
            log.info("step %d (policy version %s): %s", step, values.get("policy_version"), describe_step(values))

        yield advance


def describe_step(values: dict[str, Any]) -> str:
    """A step's progress line: what moves. Not the loss: with group-relative advantages it
    is ≈ 0 by construction (Σ_i A_i = 0 at ratio 1) whatever the update does."""
    parts = []
    for key, label, fmt in (("rollouts/total", "rollouts", "{:d}"),
                            ("reward/mean", "reward", "{:.3f}"), ("success_rate", "success", "{:.0%}"),
                            ("train/kl", "kl", "{:.2e}"), ("train/clip_fraction", "clip", "{:.1%}"),
                            ("train/grad_norm", "|g|", "{:.3g}"), ("train/entropy", "entropy", "{:.3f}"),
                            ("merge/rate", "merge", "{:.0%}"),
                            ("val/success_rate", "val", "{:.0%}"), ("time/step_s", "step", "{:.0f}s"),
                            ("time/train_s", "training", "{:.0f}s")):
        v = values.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v):
            parts.append(f"{label} {fmt.format(v)}")
    return " · ".join(parts)
