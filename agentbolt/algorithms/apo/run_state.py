"""The state one APO run works with (:class:`APORun`): candidates, beam, RNG, rollouts per candidate."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbolt.algorithms.apo.candidates import Candidate
from agentbolt.algorithms.apo.result import RoundRecord
from agentbolt.algorithms.apo.rollout_scores import mean_or_none
from agentbolt.algorithms.apo.selection import best_of
from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.evaluate import EvaluationResult
from agentbolt.types import Rollout

__all__ = ["APORun"]


@dataclass
class APORun:
    """What one APO run works with and accumulates: the data splits, every candidate, the beam, the RNG."""

    ctx: AlgorithmContext
    run_dir: Path
    train: list[Any]
    val: list[Any]
    candidates: list[Candidate] = field(default_factory=list)
    beam: list[Candidate] = field(default_factory=list)
    val_indices: list[int] = field(default_factory=list)
    rng: random.Random = field(default_factory=random.Random)
    completed: int = 0
    before: EvaluationResult | None = None
    rollouts: dict[str, list[Rollout]] = field(default_factory=dict)
    """This process's validation rollouts per candidate id."""
    records: list[RoundRecord] = field(default_factory=list)

    def new_candidate(self, template: str, *, parent: Candidate | None, round_: int, critique: str | None) -> Candidate:
        c = Candidate(candidate_id=f"c{len(self.candidates)}", template=template,
                      parent_id=None if parent is None else parent.candidate_id, round=round_, critique=critique)
        self.candidates.append(c)
        return c

    def round_metrics(self, r: int, new: Sequence[Candidate], rejected: int, dropped: int, idle: int) -> dict[str, Any]:
        best = best_of(self.candidates)
        beam_means = [c.mean_val for c in self.beam if c.mean_val is not None]
        return {"best_mean_val": best.mean_val, "beam_mean_val": mean_or_none(beam_means),
                "n_candidates": len(self.candidates), "n_new": len(new), "n_rejected_edits": rejected,
                "n_dropped_edits": dropped, "n_parents_without_failures": idle,
                "val/failed": sum(c.n_failed for c in new) if r else self.candidates[0].n_failed}
