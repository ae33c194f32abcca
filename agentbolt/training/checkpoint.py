"""Checkpoints: resume a training run (GRPO, SFT) after a crash without losing a step.

``run_dir/checkpoints/step-000007/`` holds the trained weights (the LoRA, or every
weight) as safetensors, the optimizer state, and ``state.json``: the step, the policy
version, the task stream position and the groups in flight (their rollouts are in the
store, so a resumed async run picks them up instead of sampling them again). A
checkpoint is written to a temporary directory and renamed into place, so a crash while
saving leaves the previous one intact; the newest ``keep`` are kept.

A sharded policy (FSDP2) is checkpointed as shards instead: ``shards/`` holds every
rank's part of the trainable weights and of the optimizer state
(``torch.distributed.checkpoint``, loadable on any number of ranks or in one process:
:func:`~agentbolt.training.ranks.load_checkpoint`), and ``optimizer.pt`` only what is not
in them (GRPO's update count). Rank 0 makes the temporary directory, every rank writes
its shards into it, rank 0 renames it: it must be on a file system every rank sees.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = ["Checkpoint", "CheckpointManager"]

_WEIGHTS = "trainable.safetensors"
_OPTIMIZER = "optimizer.pt"
_STATE = "state.json"
_SHARDS = "shards"


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint."""

    path: Path
    step: int
    state: dict[str, Any]
    weights: dict[str, torch.Tensor]
    """The trainable weights (empty in a sharded checkpoint: they are in ``shards``)."""
    optimizer: dict[str, Any]
    shards: Path | None = None
    """A sharded checkpoint's shards (weights and optimizer state), else None."""


class CheckpointManager:
    """Saves and finds checkpoints under ``run_dir/checkpoints``."""

    def __init__(self, run_dir: str | Path, keep: int = 2) -> None:
        self.root = Path(run_dir) / "checkpoints"
        self.keep = keep

    def save(self, step: int, weights: dict[str, torch.Tensor], optimizer: dict[str, Any],
             state: dict[str, Any], *, shards: Callable[[Path], None] | None = None) -> Path:
        """Write the checkpoint of ``step`` (atomically) and prune old ones. ``shards``
        (a sharded policy; ``weights`` unused): writes the shards into the directory it is
        given, every rank joining."""
        from safetensors.torch import save_file

        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / f"step-{step:06d}"
        tmp = self.root / f".tmp-step-{step:06d}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        if shards is not None:
            shards(tmp / _SHARDS)
        else:
            save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp / _WEIGHTS))
        torch.save(optimizer, tmp / _OPTIMIZER)
        (tmp / _STATE).write_text(json.dumps({**state, "step": step}, indent=2, default=str))
        _fsync_dir(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(self.root)
        for old in self.list()[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def list(self) -> list[Path]:
        """Complete checkpoints, oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("step-*") if (p / _STATE).is_file())

    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint, or None."""
        found = self.list()
        return self.load(found[-1]) if found else None

    @staticmethod
    def load(path: str | Path) -> Checkpoint:
        from safetensors.torch import load_file

        path = Path(path)
        state = json.loads((path / _STATE).read_text())
        optimizer = torch.load(path / _OPTIMIZER, weights_only=False)
        if (path / _SHARDS).is_dir():
            return Checkpoint(path, int(state["step"]), state, {}, optimizer, shards=path / _SHARDS)
        return Checkpoint(path, int(state["step"]), state, load_file(str(path / _WEIGHTS)), optimizer)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
