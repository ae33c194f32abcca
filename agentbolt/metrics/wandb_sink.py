"""``WandbSink``: metrics into a Weights & Biases run."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from agentbolt.metrics.base import MetricsSink, numeric_values
from agentbolt.metrics.integrations import require
from agentbolt.types import MetricValue

__all__ = ["WandbSink", "PIP_COMMAND"]

PIP_COMMAND = "pip install wandb"


class WandbSink(MetricsSink):
    """Starts a run with ``wandb.init(project=..., dir=run_dir, config=...)`` and logs
    each step with ``run.log(values, step=step)`` (``None`` values skipped). W&B steps must
    not go backwards: log a step's train and eval values before the next step. Extra
    keyword arguments go to ``wandb.init`` (``name``, ``mode="offline"``...)."""

    def __init__(
        self,
        *,
        project: str,
        run_dir: str | os.PathLike[str],
        config: Mapping[str, Any] | None = None,
        **init_kwargs: Any,
    ) -> None:
        wandb = require("wandb", "Weights & Biases", PIP_COMMAND)
        os.makedirs(run_dir, exist_ok=True)
        self._run: Any = wandb.init(project=project, dir=os.fspath(run_dir), config=dict(config or {}), **init_kwargs)

    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        if self._run is None:
            raise RuntimeError("WandbSink.log after close(): make a new sink")
        self._run.log(numeric_values(values), step=step)

    async def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None
