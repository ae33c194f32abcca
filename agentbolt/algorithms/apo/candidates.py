"""Candidate prompts and the files that remember them.

Every template APO tries is a :class:`Candidate`: its text, where it came from (parent
and the critique that produced it), the store version it was published as, and its
scores per validation item. Scores follow the design rule that infrastructure failure
is not a zero reward: a rollout that failed (or finished without a reward) is left out
of ``val_scores`` and counted in ``n_failed``.

``apo_history.jsonl`` holds one line per scored candidate (a later line for the same id
replaces an earlier one); ``apo_state.json`` the last completed round, the beam and the
sampler's state. Together they let a rerun resume after the last completed round.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["HISTORY_FILE", "STATE_FILE", "APOState", "Candidate", "append_history", "load_history", "write_history"]

HISTORY_FILE = "apo_history.jsonl"
STATE_FILE = "apo_state.json"


class Candidate(BaseModel):
    """One prompt template tried by APO, with its lineage and scores."""

    model_config = ConfigDict(extra="forbid")

    candidate_id: str
    template: str
    parent_id: str | None = None
    round: int = Field(0, ge=0)
    critique: str | None = None
    """The textual gradient the editor applied to the parent to write this template."""
    resources_version: int | None = None
    """The store's resources version this template was published as (in the latest run)."""
    val_scores: dict[int, float] = Field(default_factory=dict)
    """Validation item index → reward, for the scored rollouts only."""
    train_scores: dict[int, float] = Field(default_factory=dict)
    """Training item index → reward of the rollouts run while this was a parent."""
    n_failed: int = 0
    """Validation rollouts that failed or finished without a reward (not scored)."""
    created_at: float = Field(default_factory=time.time)

    @property
    def mean_val(self) -> float | None:
        """Mean validation reward over the scored items; None when none was scored."""
        return math.fsum(self.val_scores.values()) / len(self.val_scores) if self.val_scores else None

    @property
    def mean_train(self) -> float | None:
        """Mean reward of its training rollouts; None when it was never a parent."""
        return math.fsum(self.train_scores.values()) / len(self.train_scores) if self.train_scores else None


class APOState(BaseModel):
    """Where a run stands after a completed round."""

    model_config = ConfigDict(extra="forbid")

    completed_round: int
    beam: list[str]
    """Candidate ids of the beam after that round."""
    val_indices: list[int]
    """The validation items every candidate is scored on."""
    rng_state: Any = None
    """``random.Random.getstate()`` of the training-batch sampler, as JSON."""

    def save(self, run_dir: Path) -> None:
        _atomic_write(run_dir / STATE_FILE, self.model_dump_json(indent=2))

    @classmethod
    def load(cls, run_dir: Path) -> APOState | None:
        path = run_dir / STATE_FILE
        if not path.exists():
            return None
        return cls.model_validate_json(path.read_text())


def append_history(run_dir: Path, candidate: Candidate) -> None:
    """Add ``candidate`` (as it is now) to ``run_dir/apo_history.jsonl``."""
    with open(run_dir / HISTORY_FILE, "a", encoding="utf-8") as f:
        f.write(candidate.model_dump_json() + "\n")
        f.flush()


def load_history(run_dir: Path) -> list[Candidate]:
    """The candidates of ``run_dir/apo_history.jsonl`` in order of first appearance, each
    as last written. A torn last line (a crash mid-write) is ignored."""
    path = run_dir / HISTORY_FILE
    if not path.exists():
        return []
    by_id: dict[str, Candidate] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            candidate = Candidate.model_validate_json(line)
        except ValueError:
            if i == len(lines) - 1:
                break
            raise
        by_id[candidate.candidate_id] = candidate
    return list(by_id.values())


def write_history(run_dir: Path, candidates: list[Candidate]) -> None:
    """Replace ``run_dir/apo_history.jsonl`` with ``candidates`` (atomically)."""
    _atomic_write(run_dir / HISTORY_FILE, "".join(c.model_dump_json() + "\n" for c in candidates))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def rng_state_to_json(state: tuple[Any, ...]) -> Any:
    """``random.Random.getstate()`` as JSON-able lists."""
    return json.loads(json.dumps(state))


def rng_state_from_json(value: Any) -> tuple[Any, ...]:
    """The inverse of :func:`rng_state_to_json`."""
    version, internal, gauss = value
    return (version, tuple(internal), gauss)
