"""``TensorBoardSink``: scalars into TensorBoard event files (``tensorboard --logdir``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentbolt.metrics.base import MetricsSink, numeric_values
from agentbolt.metrics.errors import MissingIntegrationError
from agentbolt.metrics.integrations import require
from agentbolt.types import MetricValue

__all__ = ["TensorBoardSink", "PIP_COMMAND"]

PIP_COMMAND = "pip install tensorboard"


def _summary_writer_class() -> Any:
    """``torch.utils.tensorboard.SummaryWriter`` (needs the ``tensorboard`` package), else
    ``tensorboardX.SummaryWriter``."""
    try:
        return require("torch.utils.tensorboard", "TensorBoard", PIP_COMMAND).SummaryWriter
    except MissingIntegrationError:
        return require("tensorboardX", "TensorBoard", PIP_COMMAND).SummaryWriter


class TensorBoardSink(MetricsSink):
    """One scalar per metric name per step, in ``log_dir``. ``None`` values are skipped;
    the writer is flushed after each step so a crash loses nothing logged."""

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer: Any = _summary_writer_class()(log_dir=str(self.log_dir))

    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        if self._writer is None:
            raise RuntimeError("TensorBoardSink.log after close(): make a new sink")
        for name, value in numeric_values(values).items():
            self._writer.add_scalar(name, value, global_step=step)
        self._writer.flush()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
