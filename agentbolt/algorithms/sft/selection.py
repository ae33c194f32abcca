"""Which rollouts SFT learns from, and the chat records made of them.

A rollout is a candidate only when it SUCCEEDED with a reward: a failed or cancelled
rollout is an infrastructure problem, not a zero reward, and one without a reward says
nothing about its quality. Among candidates, ``min_reward`` keeps those at or above the
bar and ``top_k_per_task`` the best ``k`` of each task (a task is the rollout's input;
ties keep the earlier rollout). Both may be set: the best k of those above the bar.

Records (:func:`dedupe_records`) are compared whole: the same conversation sampled twice
is learned once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentbolt.types import Rollout, RolloutStatus

__all__ = ["NoTrainingDataError", "Selection", "dedupe_records", "load_records", "select_rollouts", "task_key"]


class NoTrainingDataError(ValueError):
    """SFT found nothing to learn from (no rollout passed the selection, no record)."""


@dataclass(frozen=True)
class Selection:
    """The rollouts kept, and why the others were not."""

    kept: tuple[Rollout, ...]
    total: int
    not_finished: int
    """Failed, cancelled or still running: never learned from."""
    unscored: int
    """Succeeded without a reward."""
    below_min_reward: int
    beyond_top_k: int

    @property
    def scored(self) -> int:
        return self.total - self.not_finished - self.unscored

    def describe(self) -> str:
        return (f"{len(self.kept)} of {self.total} rollouts kept ({self.not_finished} not succeeded, "
                f"{self.unscored} without reward, {self.below_min_reward} below min_reward, "
                f"{self.beyond_top_k} beyond top_k_per_task)")


def task_key(rollout: Rollout) -> str:
    """The task a rollout ran: its input as canonical JSON (its dataset index if the input
    is not JSON-serialisable)."""
    try:
        return orjson.dumps(rollout.input, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return f"#{rollout.metadata.get('dataset_index', rollout.rollout_id)}"


def select_rollouts(rollouts: Iterable[Rollout], *, min_reward: float | None,
                    top_k_per_task: int | None) -> Selection:
    """Keep the succeeded, scored rollouts at or above ``min_reward`` (when set), then the
    best ``top_k_per_task`` of each task (when set), in the order given."""
    rollouts = list(rollouts)
    not_finished = unscored = below = 0
    candidates: list[Rollout] = []
    for r in rollouts:
        if r.status != RolloutStatus.SUCCEEDED:
            not_finished += 1
        elif r.reward is None:
            unscored += 1
        elif min_reward is not None and r.reward < min_reward:
            below += 1
        else:
            candidates.append(r)
    beyond = 0
    if top_k_per_task is not None:
        by_task: dict[str, list[int]] = {}
        for i, r in enumerate(candidates):
            by_task.setdefault(task_key(r), []).append(i)
        keep: set[int] = set()
        for members in by_task.values():
            best = sorted(members, key=lambda i: (-(candidates[i].reward or 0.0), i))[:top_k_per_task]
            keep.update(best)
        beyond = len(candidates) - len(keep)
        candidates = [r for i, r in enumerate(candidates) if i in keep]
    return Selection(tuple(candidates), len(rollouts), not_finished, unscored, below, beyond)


def dedupe_records(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``records`` without repeats (first kept, order otherwise unchanged), and how many were dropped."""
    seen: set[bytes] = set()
    out: list[dict[str, Any]] = []
    dropped = 0
    for record in records:
        key = orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        out.append(record)
    return out, dropped


def load_records(source: str | Path | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat records from a JSONL file (OpenAI's fine-tuning format) or a list; each must be
    a mapping with a non-empty ``messages`` list."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"SFT records file {path} does not exist (expected OpenAI chat JSONL)")
        records = []
        for n, line in enumerate(path.read_bytes().splitlines(), start=1):
            if line.strip():
                try:
                    records.append(orjson.loads(line))
                except orjson.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not a JSON object ({exc})") from None
    else:
        records = list(source)
    for i, record in enumerate(records):
        messages = record.get("messages") if isinstance(record, dict) else None
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ValueError(f"SFT record {i} has no 'messages' list of message objects: expected "
                             '{"messages": [{"role": "user", "content": ...}, {"role": "assistant", ...}]}')
    return records
