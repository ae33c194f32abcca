"""``MlflowSink``: metrics into an MLflow run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentbolt.metrics.base import MetricsSink, numeric_values
from agentbolt.metrics.integrations import require
from agentbolt.types import MetricValue

__all__ = ["MlflowSink", "PIP_COMMAND"]

PIP_COMMAND = "pip install mlflow"

_MAX_PARAM_CHARS = 500  # MLflow refuses longer param values


class MlflowSink(MetricsSink):
    """Starts a run with ``mlflow.start_run(run_name=...)`` (in ``experiment`` when given,
    at ``tracking_uri`` when given), logs ``config`` as params and each step with
    ``mlflow.log_metrics(values, step=step)`` (``None`` values skipped); :meth:`close`
    ends the run. The run is MLflow's active run meanwhile, so your own ``mlflow.log_*``
    calls land in it too."""

    def __init__(
        self,
        *,
        experiment: str | None = None,
        run_name: str | None = None,
        tracking_uri: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        mlflow = require("mlflow", "MLflow", PIP_COMMAND)
        if tracking_uri:
            mlflow.set_tracking_uri(tracking_uri)
        if experiment:
            mlflow.set_experiment(experiment)
        self._mlflow: Any = mlflow
        self._run: Any = mlflow.start_run(run_name=run_name)
        if config:
            mlflow.log_params({str(k): str(v)[:_MAX_PARAM_CHARS] for k, v in config.items()})

    async def log(self, step: int, values: Mapping[str, MetricValue]) -> None:
        if self._run is None:
            raise RuntimeError("MlflowSink.log after close(): make a new sink")
        numbers = numeric_values(values)
        if numbers:
            self._mlflow.log_metrics(numbers, step=step)

    async def close(self) -> None:
        if self._run is not None:
            self._mlflow.end_run()
            self._run = None
