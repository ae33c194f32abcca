"""``MetricsLogger``: fan one step's numbers out to every sink, and never let a broken
sink stop training."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from agentbolt.metrics.base import MetricsSink
from agentbolt.store.base import Store
from agentbolt.types import MetricValue

__all__ = ["MetricsLogger", "SINK_NAMES", "JSONL_FILE_NAME", "TENSORBOARD_DIR_NAME"]

logger = logging.getLogger("agentbolt.metrics")

SINK_NAMES = ("jsonl", "store", "tensorboard", "wandb", "mlflow")
"""The names :meth:`MetricsLogger.from_names` understands."""
JSONL_FILE_NAME = "metrics.jsonl"
"""The JSONL sink's file inside the run directory."""
TENSORBOARD_DIR_NAME = "tensorboard"
"""The TensorBoard sink's folder inside the run directory."""


class MetricsLogger:
    """Sends each :meth:`log` to all ``sinks``, in order.

    A sink that raises is reported once (a warning on the ``agentbolt.metrics`` logger,
    with the traceback) and disabled for the rest of the run; the others go on. Metrics
    must never kill a training run.
    """

    def __init__(self, sinks: Sequence[MetricsSink]) -> None:
        self.sinks: list[MetricsSink] = list(sinks)
        self.disabled: list[MetricsSink] = []
        """Sinks that failed and no longer receive metrics."""
        self._closed = False

    @property
    def active(self) -> list[MetricsSink]:
        """The sinks still receiving metrics."""
        return [s for s in self.sinks if s not in self.disabled]

    def _disable(self, sink: MetricsSink, action: str) -> None:
        self.disabled.append(sink)
        logger.warning(
            "metrics sink %s failed to %s and is disabled for the rest of this run; "
            "training goes on, the other sinks still record",
            type(sink).__name__,
            action,
            exc_info=True,
        )

    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        """Record ``values`` for ``step`` in every working sink."""
        if self._closed:
            raise RuntimeError("MetricsLogger.log after close(): make a new logger")
        snapshot = dict(values)  # a sink must not see another sink's changes
        for sink in self.active:
            try:
                await sink.log(step, dict(snapshot))
            except Exception:  # noqa: BLE001 — a failing sink is switched off (and said so), training goes on
                self._disable(sink, f"log step {step}")

    async def close(self) -> None:
        """Close every sink (even disabled ones: they may hold files). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for sink in self.sinks:
            try:
                await sink.close()
            except Exception:
                logger.warning("metrics sink %s failed to close", type(sink).__name__, exc_info=True)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @classmethod
    def from_names(
        cls,
        names: Sequence[str],
        *,
        run_dir: str | os.PathLike[str],
        store: Store | None = None,
        run_id: str | None = None,
        config: dict[str, Any] | None = None,
        project: str = "agentbolt",
    ) -> MetricsLogger:
        """Sinks by name: ``jsonl`` (``run_dir/metrics.jsonl``), ``store`` (needs
        ``store`` and ``run_id``), ``tensorboard`` (``run_dir/tensorboard``), ``wandb``
        (project ``project``, run name ``run_id``) and ``mlflow`` (experiment
        ``project``, run name ``run_id``). ``config`` is the run's configuration, shown by
        the trackers. A missing optional library raises :class:`MissingIntegrationError`
        now, not at the first step."""
        unknown = [n for n in names if n not in SINK_NAMES]
        if unknown:
            raise ValueError(f"unknown metrics sink(s) {', '.join(map(repr, unknown))}; choose from "
                             f"{', '.join(SINK_NAMES)}")
        run_path = Path(run_dir)
        sinks: list[MetricsSink] = []
        try:
            for name in dict.fromkeys(names):
                sinks.append(_make(name, run_path, store, run_id, config, project))
        except BaseException:
            for made in sinks:  # do not leak open files or tracker runs
                _close_quietly(made)
            raise
        return cls(sinks)


def _make(
    name: str, run_dir: Path, store: Store | None, run_id: str | None, config: dict[str, Any] | None, project: str
) -> MetricsSink:
    if name == "jsonl":
        from agentbolt.metrics.jsonl import JsonlSink

        return JsonlSink(run_dir / JSONL_FILE_NAME)
    if name == "store":
        if store is None or not run_id:
            raise ValueError("the 'store' metrics sink needs store= and run_id= (the name the metrics go under)")
        from agentbolt.metrics.store_sink import StoreSink

        return StoreSink(store, run_id)
    if name == "tensorboard":
        from agentbolt.metrics.tensorboard import TensorBoardSink

        return TensorBoardSink(run_dir / TENSORBOARD_DIR_NAME)
    if name == "wandb":
        from agentbolt.metrics.wandb_sink import WandbSink

        return WandbSink(project=project, run_dir=run_dir, config=config, name=run_id)
    from agentbolt.metrics.mlflow_sink import MlflowSink

    return MlflowSink(experiment=project, run_name=run_id, config=config)


def _close_quietly(sink: MetricsSink) -> None:
    """Close a just-made built-in sink from sync code: their ``close`` never awaits, so
    one step of the coroutine runs it to the end."""
    coro = sink.close()
    try:
        coro.send(None)
    except StopIteration:
        pass
    except Exception:
        logger.warning("metrics sink %s failed to close", type(sink).__name__, exc_info=True)
    finally:
        coro.close()

