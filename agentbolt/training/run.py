"""``TrainingRun``: the skeleton every weight-training run shares (GRPO, SFT, later ones).

Around an algorithm's own steps, a run always does the same things, in this order:

1. a **run directory** (``run_dir``, or ``runs/<name>-<time>``) and a **run id** (``run_name``,
   or the directory's name) that names it in metrics and checkpoints;
2. **resume**: the newest checkpoint under ``run_dir/checkpoints`` when ``resume`` is set
   (what it holds besides the weights is the algorithm's business);
3. **metrics** to the configured sinks (jsonl, store, tensorboard...), closed at the end;
4. a held-out **evaluation** before training (step 0) and after it (the last step), each
   logged with the policy version it evaluated;
5. **checkpoints** after steps (the trainable weights, the optimizer, the run state);
6. the **export** of the trained policy (``export_dir``, or ``run_dir/model``) and the
   run's wall time for its result.

An algorithm keeps only its own idea — what one step does — and calls these in its
``run``. The evaluation is the algorithm's (anything whose result has
``metrics(version)``); this floor knows no algorithm.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agentbolt.training.checkpoint import Checkpoint, CheckpointManager

__all__ = ["Evaluated", "TrainingRun"]


class Evaluated(Protocol):
    """An evaluation's result, as a run logs it."""

    def metrics(self, version: int | None) -> Mapping[str, Any]: ...


E = TypeVar("E", bound=Evaluated)


class TrainingRun:
    """One training run's directory, id, checkpoints, metrics, evaluations and export.

    ``name`` (``"GRPO"``, ``"SFT"``) prefixes its console lines and the default directory
    (``runs/grpo-20261202-013000``)."""

    def __init__(self, name: str, console: Any, *, run_dir: str | None, run_name: str | None,
                 keep_checkpoints: int = 2) -> None:
        self.name = name
        self.console = console
        self.t_start = time.perf_counter()
        self.run_dir = Path(run_dir or f"runs/{name.lower()}-{time.strftime('%Y%m%d-%H%M%S')}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_name or self.run_dir.name
        self.checkpoints = CheckpointManager(self.run_dir, keep=keep_checkpoints)
        self.metrics: Any = None

    # ------------------------------------------------------------------ resume, metrics
    def resume_from(self, resume: bool) -> Checkpoint | None:
        """The newest complete checkpoint of this run directory, when ``resume`` is set."""
        return self.checkpoints.latest() if resume else None

    def open_metrics(self, loggers: Sequence[Any], store: Any, config: Any) -> Any:
        """The run's metrics logger (``config``: the run's pydantic config, recorded once)."""
        from agentbolt.metrics import MetricsLogger

        self.metrics = MetricsLogger.from_names(loggers, run_dir=self.run_dir, store=store, run_id=self.run_id,
                                                config=config.model_dump(mode="json"))
        return self.metrics

    async def close(self) -> None:
        """Close the metrics (idempotent)."""
        if self.metrics is not None:
            await self.metrics.close()

    # ------------------------------------------------------------------ evaluation, checkpoints, export
    async def evaluate(self, evaluate: Callable[[], Awaitable[E]], step: int, version: int | None) -> E:
        """Run ``evaluate`` and log its metrics at ``step`` under the policy ``version``."""
        result = await evaluate()
        await self.metrics.log(step, result.metrics(version))
        return result

    async def save(self, step: int, policy: Any, optimizer: dict[str, Any], state: dict[str, Any]) -> None:
        """Checkpoint ``step``: the policy's trainable weights, the optimizer state, and
        ``state`` (with the run id), off the event loop."""
        await asyncio.to_thread(self.checkpoints.save, step, policy.trainable_state(), optimizer,
                                {**state, "run_id": self.run_id})

    async def export(self, policy: Any, export_dir: str | None) -> Path:
        """Save the trained policy as a model directory (``export_dir``, or ``run_dir/model``)."""
        out: Path = await asyncio.to_thread(policy.export, export_dir or str(self.run_dir / "model"))
        self.console.print(f"[bold]{self.name}[/]: trained policy saved to {out}")
        return out

    @property
    def seconds(self) -> float:
        """Wall time since the run started."""
        return time.perf_counter() - self.t_start
