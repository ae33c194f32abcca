"""What an APO run returns (:class:`APOResult`, one :class:`RoundRecord` per round) and its error."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbolt.algorithms.apo.candidates import Candidate
from agentbolt.algorithms.evaluate import EvaluationResult
from agentbolt.types import PromptTemplate

__all__ = ["APOError", "APOResult", "RoundRecord"]


class APOError(ValueError):
    """APO cannot run as set up (no validation set, no prompt to start from, no critic...)."""


@dataclass
class RoundRecord:
    """One round of this process's run."""

    round: int
    beam: list[str]
    """Candidate ids kept after the round, best first."""
    new: list[str]
    """Candidate ids created (and scored) in the round."""
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class APOResult:
    """What an APO run found."""

    best: Candidate
    candidates: list[Candidate]
    """Every candidate of the run (resumed ones included), in creation order."""
    rounds: int
    """Rounds completed (round 0, the initial prompt, not counted)."""
    run_dir: Path
    prompt_file: Path | None = None
    """``run_dir/best_prompt.txt``: the best template."""
    before: EvaluationResult | None = None
    """The initial template on the whole validation set (``eval_before``)."""
    after: EvaluationResult | None = None
    """The best template on the whole validation set (``eval_after``)."""
    history: list[RoundRecord] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def best_prompt(self) -> PromptTemplate:
        return PromptTemplate(template=self.best.template)

    @property
    def improvement(self) -> float | None:
        """Mean validation reward after minus before (None without both evaluations)."""
        if self.before is None or self.after is None:
            return None
        if self.before.mean_reward is None or self.after.mean_reward is None:
            return None
        return self.after.mean_reward - self.before.mean_reward
