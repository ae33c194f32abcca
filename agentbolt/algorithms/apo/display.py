"""What APO shows on the console: the table of candidates after each round and the rounds' progress bar."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table

from agentbolt.algorithms.apo.candidates import Candidate
from agentbolt.algorithms.progress import ConsoleProgress

__all__ = ["round_progress", "round_table"]


def round_table(r: int, beam: Sequence[Candidate], new: Sequence[Candidate]) -> Table:
    """The beam and the round's new candidates, best mean validation reward first."""
    beam_ids = {c.candidate_id for c in beam}
    shown = {c.candidate_id: c for c in [*beam, *new]}
    table = Table(box=box.SIMPLE_HEAVY, title=f"APO round {r}", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("candidate", "left"), ("parent", "left"), ("round", "right"), ("mean val", "right"),
        ("scored", "right"), ("failed", "right"), ("beam", "center"), ("critique", "left"))
    for name, justify in columns:
        table.add_column(name, justify=justify, max_width=50 if name == "critique" else None,
                         overflow="ellipsis", no_wrap=name == "critique")
    for c in sorted(shown.values(), key=lambda c: -(c.mean_val if c.mean_val is not None else -math.inf)):
        table.add_row(c.candidate_id, c.parent_id or "—", str(c.round),
                      "—" if c.mean_val is None else f"{c.mean_val:.3f}", str(len(c.val_scores)), str(c.n_failed),
                      "✓" if c.candidate_id in beam_ids else "", " ".join((c.critique or "").split()))
    return table


@contextlib.contextmanager
def round_progress(console: Console, total: int, done: int, enabled: bool) -> Iterator[Callable[[Any], None]]:
    """Progress over the rounds (a bar on a terminal, a plain line per round elsewhere);
    yields ``advance(record)``."""
    with ConsoleProgress(console, "APO rounds", total, done=done, unit="round",
                         enabled=enabled and done < total) as bar:

        def advance(record: Any) -> None:
            best = record.metrics.get("best_mean_val")
            bar.update(record.round, "" if best is None else f"best {best:.3f}", force=True)

        yield advance
