"""Which candidates survive a round.

* **beam** — the ``width`` best by mean validation reward; ties go to the older one.
* **pareto** (in the spirit of GEPA) — for each validation item, the candidates with
  the highest reward on it form that item's front (items where all candidates score
  the same are skipped); a candidate on at least one front survives unless another
  survivor dominates it (as good everywhere, better somewhere), so a prompt that alone
  solves some items is kept even with a lower mean.
  When more than ``width`` do, those that top the most items are preferred, then the
  higher mean, then the older.

Candidates with no scored item (every rollout failed) rank last and are on no front.
The best overall is always the highest mean validation reward among all candidates.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentbolt.algorithms.apo.candidates import Candidate

__all__ = ["best_of", "fronts", "select", "select_beam", "select_pareto"]


def _by_mean(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Highest mean first; the sort is stable, so ties keep the given (creation) order."""
    return sorted(candidates, key=lambda c: -c.mean_val if c.mean_val is not None else float("inf"))


def select_beam(candidates: Sequence[Candidate], width: int) -> list[Candidate]:
    """The ``width`` candidates with the highest mean validation reward."""
    return _by_mean(candidates)[:width]


def fronts(candidates: Sequence[Candidate]) -> dict[int, list[Candidate]]:
    """Validation item index → the candidates with the highest reward on it. Items on
    which every candidate scored the same are left out: they separate nobody (else a
    prompt that solves nothing would sit on the front of every item nobody solves)."""
    out: dict[int, list[Candidate]] = {}
    items = sorted({i for c in candidates for i in c.val_scores})
    for i in items:
        scores = [c.val_scores[i] for c in candidates if i in c.val_scores]
        if min(scores) == max(scores):
            continue
        out[i] = [c for c in candidates if c.val_scores.get(i) == max(scores)]
    return out


def select_pareto(candidates: Sequence[Candidate], width: int) -> list[Candidate]:
    """The undominated candidates best on at least one validation item; at most
    ``width`` of them, those on most fronts first, then by mean."""
    wins: dict[str, int] = {}
    for front in fronts(candidates).values():
        for c in front:
            wins[c.candidate_id] = wins.get(c.candidate_id, 0) + 1
    on_front = [c for c in candidates if c.candidate_id in wins]
    on_front = [c for c in on_front if not any(_dominates(o, c) for o in on_front)]
    if not on_front:  # nothing was scored at all: keep the beam going by age
        return select_beam(candidates, width)
    ranked = sorted(_by_mean(on_front), key=lambda c: -wins[c.candidate_id])  # stable: mean, then age break ties
    return ranked[:width]


def _dominates(a: Candidate, b: Candidate) -> bool:
    """``a`` scores at least as well as ``b`` on every item ``b`` was scored on, better on one."""
    if not b.val_scores or any(i not in a.val_scores for i in b.val_scores):
        return False
    diffs = [a.val_scores[i] - b.val_scores[i] for i in b.val_scores]
    return min(diffs) >= 0 and max(diffs) > 0


def select(candidates: Sequence[Candidate], width: int, how: str) -> list[Candidate]:
    """:func:`select_beam` or :func:`select_pareto` by name."""
    if how == "beam":
        return select_beam(candidates, width)
    if how == "pareto":
        return select_pareto(candidates, width)
    raise ValueError(f"unknown selection {how!r}: use 'beam' or 'pareto'")


def best_of(candidates: Sequence[Candidate]) -> Candidate:
    """The candidate with the highest mean validation reward (the oldest among equals)."""
    if not candidates:
        raise ValueError("no candidates to choose from")
    return _by_mean(candidates)[0]
