"""Policy versions: each names one set of weights for good, and says how far behind it is.

Every token carries the version of the weights that sampled it, and the staleness rule
and the importance correction read it. Two things keep that sound across crashes:

* **never reused.** A run writes the highest version it has asked an engine to serve to
  ``run_dir/versions.json`` *before* publishing it (:class:`PublishedVersions`). A resumed
  run republishes its checkpoint's weights under a version above every version used
  before (:func:`resume_version`): weights published after the last checkpoint were lost
  with the crash, and their number is not given to other weights.
* **lag by updates, not by numbers.** :class:`VersionLineage` maps each version the trainer
  holds weights for to the number of updates ``u(v)`` it had made when publishing it
  (checkpointed with the run). The lag of a token sampled by version v, trained at version
  V, is ``u(V) − u(v)``: a republished checkpoint has a new number and lag 0 to it. A version
  not in the lineage — published after the checkpoint a run resumed from, or newer than the
  trainer — names weights the trainer no longer has; such rollouts are dropped
  (:func:`~agentbolt.training.staleness.split_stale`), never trained as fresh.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PublishedVersions", "VersionLineage", "resume_version"]


class VersionLineage:
    """``version → updates made when it was published``, for the versions still trainable on."""

    def __init__(self, updates: Mapping[int, int] | None = None) -> None:
        self._updates: dict[int, int] = {int(v): int(u) for v, u in (updates or {}).items()}

    def add(self, version: int, updates: int, *, keep_lag: int | None = None) -> None:
        """Record that ``version`` holds the weights after ``updates`` updates; forget
        versions more than ``keep_lag`` updates behind (their rollouts are too stale anyway)."""
        self._updates[int(version)] = int(updates)
        if keep_lag is not None:
            floor = updates - keep_lag - 1
            self._updates = {v: u for v, u in self._updates.items() if u >= floor}

    def updates_of(self, version: int) -> int | None:
        return self._updates.get(int(version))

    def lag(self, version: int, current: int) -> int | None:
        """Updates between ``version`` and ``current``; None when either is unknown."""
        u, now = self._updates.get(int(version)), self._updates.get(int(current))
        return None if u is None or now is None else now - u

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and version in self._updates

    def to_json(self) -> dict[str, int]:
        return {str(v): u for v, u in sorted(self._updates.items())}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> VersionLineage:
        return cls({int(v): int(u) for v, u in (data or {}).items()})


def resume_version(checkpoint_version: int | None, published: int | None, served: int | None) -> int | None:
    """The version a resumed run republishes its checkpoint's weights under: the
    checkpoint's own when no higher version was ever used (by this run, ``published``, or
    by the engine, ``served``), else one above all of them."""
    if checkpoint_version is None:
        return None
    highest = max(v for v in (checkpoint_version, published, served) if v is not None)
    return checkpoint_version if highest == checkpoint_version else highest + 1


class PublishedVersions:
    """``run_dir/versions.json``: the highest version this run has published (or was about to)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / "versions.json"

    def read(self) -> int | None:
        try:
            value = json.loads(self.path.read_text()).get("published")
        except (OSError, ValueError):
            return None
        return value if isinstance(value, int) else None

    def note(self, version: int | None) -> None:
        """Durably record that ``version`` is about to be served (before the publish: a
        crash right after it must not let the number be handed out again)."""
        if version is None or (self.read() or -1) >= version:
            return
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps({"published": version}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
