"""The optional tracker sinks: a missing library is a MissingIntegrationError with the
exact pip command; with the library present the sink calls its documented API.

W&B and MLflow are not installed in the test environment, so their API calls are
checked against small stand-in modules placed in ``sys.modules``.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agentbolt.metrics import MetricsLogger, MissingIntegrationError
from agentbolt.metrics.mlflow_sink import MlflowSink
from agentbolt.metrics.tensorboard import TensorBoardSink
from agentbolt.metrics.wandb_sink import WandbSink


@pytest.mark.parametrize(
    ("name", "hidden", "command"),
    [
        ("tensorboard", ["torch.utils.tensorboard", "tensorboardX"], "pip install tensorboard"),
        ("wandb", ["wandb"], "pip install wandb"),
        ("mlflow", ["mlflow"], "pip install mlflow"),
    ],
)
def test_a_missing_library_names_the_pip_command(
    name: str, hidden: list[str], command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail

    with pytest.raises(MissingIntegrationError) as caught:
        MetricsLogger.from_names(["jsonl", name], run_dir=tmp_path)

    assert isinstance(caught.value, ImportError)
    assert f"`{command}`" in str(caught.value)
    assert caught.value.pip_command == command


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return self

        return call


def _fake_module(monkeypatch: pytest.MonkeyPatch, name: str) -> _Recorder:
    recorder = _Recorder()
    module = types.ModuleType(name)
    module.__getattr__ = recorder.__getattr__  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, name, module)
    return recorder


async def test_wandb_sink_inits_logs_numbers_only_and_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wandb = _fake_module(monkeypatch, "wandb")

    sink = WandbSink(project="p", run_dir=tmp_path / "run", config={"lr": 1e-6}, name="r1")
    await sink.log(3, {"loss": 0.5, "kl": None})
    await sink.close()

    assert [c[0] for c in wandb.calls] == ["init", "log", "finish"]
    assert wandb.calls[0][2] == {"project": "p", "dir": str(tmp_path / "run"), "config": {"lr": 1e-6}, "name": "r1"}
    assert wandb.calls[1][1:] == (({"loss": 0.5},), {"step": 3})


async def test_mlflow_sink_starts_a_run_logs_metrics_and_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = _fake_module(monkeypatch, "mlflow")

    sink = MlflowSink(experiment="agentbolt", run_name="r1", config={"lr": 1e-6})
    await sink.log(3, {"loss": 0.5, "kl": None})
    await sink.log(4, {"kl": None})  # nothing numeric: nothing sent
    await sink.close()

    names = [c[0] for c in mlflow.calls]
    assert names == ["set_experiment", "start_run", "log_params", "log_metrics", "end_run"]
    assert mlflow.calls[1][2] == {"run_name": "r1"}
    assert mlflow.calls[3][1:] == (({"loss": 0.5},), {"step": 3})


def test_tensorboard_sink_is_importable_without_tensorboard() -> None:
    # the module itself imports nothing optional: only making a sink does
    assert TensorBoardSink.__module__ == "agentbolt.metrics.tensorboard"
