"""Training metrics: sinks that record one dict of numbers per step, and the logger that
fans out to them.

    async with MetricsLogger.from_names(["jsonl", "store"], run_dir="runs/r1",
                                        store=store, run_id="r1") as metrics:
        await metrics.log(step, {"train/reward_mean": 0.42, "val/success_rate": 0.8})

The JSONL file and the Store (which the dashboard reads) are always available;
TensorBoard, Weights & Biases and MLflow are used when their package is installed.
"""

from agentbolt.metrics.base import MetricsSink
from agentbolt.metrics.errors import MissingIntegrationError
from agentbolt.metrics.jsonl import JsonlSink, read_jsonl
from agentbolt.metrics.logger import JSONL_FILE_NAME, SINK_NAMES, TENSORBOARD_DIR_NAME, MetricsLogger
from agentbolt.metrics.store_sink import StoreSink

__all__ = [
    "JSONL_FILE_NAME",
    "SINK_NAMES",
    "TENSORBOARD_DIR_NAME",
    "JsonlSink",
    "MetricsLogger",
    "MetricsSink",
    "MissingIntegrationError",
    "MlflowSink",
    "StoreSink",
    "TensorBoardSink",
    "WandbSink",
    "read_jsonl",
]


def __getattr__(name: str) -> object:
    # the tracker sinks are imported on first use only: importing agentbolt.metrics
    # must stay cheap and must not need their libraries
    if name == "TensorBoardSink":
        from agentbolt.metrics.tensorboard import TensorBoardSink

        return TensorBoardSink
    if name == "WandbSink":
        from agentbolt.metrics.wandb_sink import WandbSink

        return WandbSink
    if name == "MlflowSink":
        from agentbolt.metrics.mlflow_sink import MlflowSink

        return MlflowSink
    raise AttributeError(f"module 'agentbolt.metrics' has no attribute {name!r}")
