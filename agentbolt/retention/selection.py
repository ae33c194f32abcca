"""What an export takes from the store: :class:`ExportSelection`.

The store has no "run" object: a training run is the rollouts it enqueued (in a time
window, of some modes and statuses, against some policy versions, or listed by id) plus
the training metrics it logged under its ``run_id``. A selection says exactly that; every
filter given must hold (they combine with AND), and an empty selection takes every
rollout and no metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentbolt.retention.times import parse_time
from agentbolt.types import Attempt, Rollout, RolloutMode, RolloutStatus

__all__ = ["ExportSelection"]


class ExportSelection(BaseModel):
    """Which rollouts (with their attempts, spans and samples) and which metric runs to export."""

    model_config = ConfigDict(extra="forbid")

    since: float | None = Field(None, description="Rollouts created at or after this time (epoch seconds or ISO 8601).")
    until: float | None = Field(None, description="Rollouts created before this time (epoch seconds or ISO 8601).")
    status: list[RolloutStatus] | None = Field(None, description="Only rollouts in one of these statuses.")
    mode: RolloutMode | None = Field(None, description="Only train, val or test rollouts.")
    min_resources_version: int | None = Field(None, ge=1, description="Rollouts run with this resources version or "
                                                                      "later.")
    max_resources_version: int | None = Field(None, ge=1, description="Rollouts run with this resources version or "
                                                                      "earlier.")
    rollout_ids: list[str] | None = Field(None, description="Only these rollouts (unknown ids are skipped).")
    metric_runs: list[str] = Field(default_factory=list, description="Training-metric runs (run_id) to export.")

    @field_validator("since", "until", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return None if value is None else parse_time(value)

    @model_validator(mode="after")
    def _ranges(self) -> ExportSelection:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError(f"since ({self.since}) must be before until ({self.until})")
        lo, hi = self.min_resources_version, self.max_resources_version
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_resources_version ({lo}) is above max_resources_version ({hi})")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> ExportSelection:
        """Read a YAML mapping of these fields; ``overrides`` win."""
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise TypeError(f"{path}: expected a mapping of ExportSelection fields, got {type(data).__name__}")
        return cls.model_validate({**data, **overrides})

    @property
    def filters_versions(self) -> bool:
        return self.min_resources_version is not None or self.max_resources_version is not None

    def created_in_window(self, rollout: Rollout) -> bool:
        """Whether ``since <= created_at < until``."""
        if self.since is not None and rollout.created_at < self.since:
            return False
        return self.until is None or rollout.created_at < self.until

    def version_matches(self, rollout: Rollout, attempts: list[Attempt]) -> bool:
        """Whether the rollout ran with a resources version in range: the version it was
        enqueued with, else the one its latest attempt got at claim time. A rollout with
        no version at all (never claimed) is left out when a range is set."""
        if not self.filters_versions:
            return True
        version = rollout.resources_version
        if version is None and attempts:
            version = attempts[-1].resources_version
        if version is None:
            return False
        lo, hi = self.min_resources_version, self.max_resources_version
        return (lo is None or version >= lo) and (hi is None or version <= hi)
