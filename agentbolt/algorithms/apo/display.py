"""What APO shows on the console: the table of candidates after each round and the rounds' progress bar."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from agentbolt.algorithms.apo.candidates import Candidate

__all__ = ["round_progress", "round_table"]


def round_table(r: int, beam: Sequence[Candidate], new: Sequence[Candidate]) -> Table:
    """The beam and the round's new candidates, best mean validation reward first."""
    beam_ids = {c.candidate_id for c in beam}
    shown = {c.candidate_id: c for c in [*beam, *new]}
    table = Table(box=box.SIMPLE_HEAVY, title=f"APO round {r}", title_justify="left")
    for name, justify in (("candidate", "left"), ("parent", "left"), ("round", "right"), ("mean val", "right"),
                          ("scored", "right"), ("failed", "right"), ("beam", "center"), ("critique", "left")):
        table.add_column(name, justify=justify, max_width=50 if name == "critique" else None,  # type: ignore[arg-type]
                         overflow="ellipsis", no_wrap=name == "critique")
    for c in sorted(shown.values(), key=lambda c: -(c.mean_val if c.mean_val is not None else -math.inf)):
        table.add_row(c.candidate_id, c.parent_id or "—", str(c.round),
                      "—" if c.mean_val is None else f"{c.mean_val:.3f}", str(len(c.val_scores)), str(c.n_failed),
                      "✓" if c.candidate_id in beam_ids else "", " ".join((c.critique or "").split()))
    return table


@contextlib.contextmanager
def round_progress(console: Console, total: int, done: int, enabled: bool) -> Iterator[Callable[[Any], None]]:
    """A progress bar over the rounds; yields ``advance(record)`` (a no-op when disabled or nothing is left)."""
    if not enabled or done >= total:
        yield lambda record: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("[bold]APO rounds"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console, transient=True) as bar:
        task = bar.add_task("", total=total, completed=done)

        def advance(record: Any) -> None:
            best = record.metrics.get("best_mean_val")
            bar.update(task, advance=1, description="" if best is None else f"best {best:.3f}")

        yield advance
