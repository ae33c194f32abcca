"""What a GRPO example prints at the end, and how it stops when training cannot go on."""

from __future__ import annotations

import sys
from collections.abc import Callable

from agentbolt.algorithms import GRPOResult


def pct(x: float | None) -> str:
    """A rate as a percentage (``n/a`` when there is none)."""
    return "n/a" if x is None else f"{100 * x:.1f} %"


def held_out_line(result: GRPOResult, problems: int) -> str:
    """The greedy held-out success before and after training, and the change in points."""
    before = result.before.success_rate if result.before else None
    after = result.after.success_rate if result.after else None
    points = 0.0 if result.improvement is None else 100 * result.improvement
    return (f"held-out success (greedy, {problems} problems): {pct(before)} before -> {pct(after)} after  "
            f"({points:+.1f} points)")


def run_main(main: Callable[[], object]) -> None:
    """Run an example's ``main``; when no rollout succeeds (a broken agent or setup), end
    with what happened in one line instead of a traceback."""
    from agentbolt.algorithms.failures import NoSuccessfulRolloutsError

    try:
        main()
    except NoSuccessfulRolloutsError as exc:
        sys.exit(f"\ntraining stopped: {exc}")
