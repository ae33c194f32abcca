"""``Evaluate``: run a dataset once and score it — no learning.

It makes ``Trainer.fit`` useful before any learning algorithm exists, and it is the
yardstick learning algorithms are compared with. Scores follow the design rule that
infrastructure failure is not a zero reward: the mean reward and the success rate are
taken over *scored* rollouts (finished with a reward); failed rollouts and finished
ones without a reward are counted and listed apart, never averaged in as 0.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from agentbolt import semconv
from agentbolt.algorithms.base import Algorithm, AlgorithmContext
from agentbolt.algorithms.failures import check_evaluation
from agentbolt.algorithms.progress import ConsoleProgress, wait_with_progress
from agentbolt.types import Rollout, RolloutMode, RolloutStatus

__all__ = ["Evaluate", "EvaluationResult", "EvaluationRow", "evaluation_result", "success_gain"]

log = logging.getLogger("agentbolt.algorithms")

_STATUS_STYLE = {
    RolloutStatus.SUCCEEDED: "green",
    RolloutStatus.FAILED: "red",
    RolloutStatus.CANCELLED: "yellow",
}


@dataclass(frozen=True)
class EvaluationRow:
    """One rollout of an evaluation."""

    index: int
    rollout_id: str
    input: Any
    status: RolloutStatus
    reward: float | None
    attempts: int
    duration: float | None
    error: str | None = None
    output: Any = None
    """What the agent returned when it was not a reward (its answer)."""

    @property
    def scored(self) -> bool:
        return self.status == RolloutStatus.SUCCEEDED and self.reward is not None


@dataclass(frozen=True)
class EvaluationResult:
    """Scores of one evaluation run, with every rollout in dataset order."""

    mode: RolloutMode
    threshold: float
    rows: tuple[EvaluationRow, ...]

    @property
    def n_total(self) -> int:
        return len(self.rows)

    @property
    def n_succeeded(self) -> int:
        return sum(r.status == RolloutStatus.SUCCEEDED for r in self.rows)

    @property
    def n_failed(self) -> int:
        """Rollouts that did not finish: failed (after all tries) or cancelled."""
        return sum(r.status in (RolloutStatus.FAILED, RolloutStatus.CANCELLED) for r in self.rows)

    @property
    def n_scored(self) -> int:
        return sum(r.scored for r in self.rows)

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.rows if r.scored and r.reward is not None]

    @property
    def mean_reward(self) -> float | None:
        """Mean reward of the scored rollouts; None if none was scored."""
        rewards = self.rewards
        return math.fsum(rewards) / len(rewards) if rewards else None

    @property
    def success_rate(self) -> float | None:
        """Share of scored rollouts whose reward is at least ``threshold``."""
        rewards = self.rewards
        return sum(r >= self.threshold for r in rewards) / len(rewards) if rewards else None

    def metrics(self, policy_version: int | None = None) -> dict[str, Any]:
        """The scores as the metric values learning algorithms log at an evaluation."""
        return {"val/success_rate": self.success_rate, "val/mean_reward": self.mean_reward,
                "val/scored": self.n_scored, "val/failed": self.n_failed, "val/policy_version": policy_version}

    def headline(self) -> str:
        """``success 31.2%, mean reward 0.413 (64/64 scored)``."""
        rate = "n/a" if self.success_rate is None else f"{self.success_rate:.1%}"
        mean = "n/a" if self.mean_reward is None else f"{self.mean_reward:.3f}"
        return f"success {rate}, mean reward {mean} ({self.n_scored}/{self.n_total} scored)"

    def summary(self) -> str:
        mean = "n/a" if self.mean_reward is None else f"{self.mean_reward:.4f}"
        rate = "n/a" if self.success_rate is None else f"{self.success_rate:.1%}"
        text = (
            f"{self.mode.value}: {self.n_total} rollouts, {self.n_scored} scored — mean reward {mean}, "
            f"success rate {rate} (reward ≥ {self.threshold:g})"
        )
        if self.n_failed:
            text += f"; {self.n_failed} failed (not scored)"
        unscored = self.n_succeeded - self.n_scored
        if unscored:
            text += f"; {unscored} finished without a reward"
        return text

    def table(self, max_rows: int | None = 50) -> Table:
        """Per-rollout table (the first ``max_rows`` rows)."""
        table = Table(box=box.SIMPLE_HEAVY, title=f"Evaluation ({self.mode.value})", title_justify="left")
        table.add_column("#", justify="right", style="dim")
        table.add_column("rollout", overflow="fold")
        table.add_column("input", max_width=40, overflow="ellipsis", no_wrap=True)
        table.add_column("status", no_wrap=True, min_width=9)
        table.add_column("reward", justify="right")
        table.add_column("tries", justify="right")
        table.add_column("time", justify="right")
        outputs = any(row.output is not None for row in self.rows)
        if outputs:
            table.add_column("output", max_width=40, overflow="ellipsis", no_wrap=True)
        table.add_column("error", max_width=40, overflow="ellipsis", no_wrap=True)
        rows = self.rows if max_rows is None else self.rows[:max_rows]
        for row in rows:
            reward = Text("—", style="dim") if row.reward is None else Text(
                f"{row.reward:.3f}", style="green" if row.reward >= self.threshold else ""
            )
            table.add_row(
                str(row.index),
                row.rollout_id,
                _preview(row.input),
                Text(row.status.value, style=_STATUS_STYLE.get(row.status, "")),
                reward,
                str(row.attempts),
                "" if row.duration is None else f"{row.duration:.2f}s",
                *([] if not outputs else ["" if row.output is None else _preview(row.output)]),
                row.error or "",
            )
        if len(rows) < len(self.rows):
            table.caption = f"{len(self.rows) - len(rows)} more rows not shown"
        return table

    def __rich__(self) -> RenderableType:
        return Group(self.table(), Text(self.summary(), style="bold"))


async def evaluation_result(
    ctx: AlgorithmContext, rollouts: Sequence[Rollout], *, mode: RolloutMode, threshold: float
) -> EvaluationResult:
    """Finished rollouts as an :class:`EvaluationResult`, in the order given (each failed
    attempt's error read from the store)."""
    rows = []
    for i, r in enumerate(rollouts):
        error = output = None
        if r.latest_attempt_id and r.status.is_terminal:
            attempt = await ctx.store.get_attempt(r.rollout_id, r.latest_attempt_id)
            if attempt.error is not None and r.status != RolloutStatus.SUCCEEDED:
                error = f"{attempt.error.type}: {attempt.error.message}"
            output = attempt.metadata.get(semconv.ATTEMPT_OUTPUT)
        duration = None if r.start_time is None or r.end_time is None else r.end_time - r.start_time
        rows.append(EvaluationRow(i, r.rollout_id, r.input, r.status, r.reward, r.attempt_count, duration, error,
                                  output))
    return EvaluationResult(mode=mode, threshold=threshold, rows=tuple(rows))


def success_gain(before: EvaluationResult | None, after: EvaluationResult | None) -> float | None:
    """Success rate after minus before; None unless both evaluations scored something."""
    if before is None or after is None or before.success_rate is None or after.success_rate is None:
        return None
    return after.success_rate - before.success_rate


def _preview(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Evaluate(Algorithm):
    """Run a dataset once in validation (or test) mode and report mean reward, success
    rate and a per-rollout table; returns an :class:`EvaluationResult`.

    ``dataset``: ``"val"`` or ``"train"`` (the trainer's datasets) or the items
    themselves; by default the validation set if there is one, else the training set.
    ``threshold``: the reward a rollout needs to count as a success.
    ``progress``: a bar on a terminal, a plain line every 10 s elsewhere.
    ``stop_on_no_success``: when no rollout succeeded at all (the agent is broken, not
    bad), raise :class:`~agentbolt.algorithms.failures.NoSuccessfulRolloutsError` naming
    the most common failure, after showing the table.
    """

    def __init__(
        self,
        dataset: Sequence[Any] | Literal["train", "val"] | None = None,
        *,
        mode: RolloutMode | str = RolloutMode.VAL,
        threshold: float = 1.0,
        timeout: float | None = None,
        show: bool = True,
        max_rows: int | None = 50,
        console: Console | None = None,
        progress: bool = True,
        stop_on_no_success: bool = True,
        label: str | None = None,
    ) -> None:
        self.dataset = dataset
        self.mode = RolloutMode(mode)
        if self.mode == RolloutMode.TRAIN:
            raise ValueError("Evaluate runs rollouts in 'val' or 'test' mode, not 'train'")
        self.threshold = threshold
        self.timeout = timeout
        self.show = show
        self.max_rows = max_rows
        self.console = console
        self.progress = progress
        self.stop_on_no_success = stop_on_no_success
        self.label = label

    def _items(self, ctx: AlgorithmContext) -> Sequence[Any]:
        if self.dataset == "train" or (self.dataset is None and ctx.val_dataset is None):
            items = ctx.train_dataset
            which = "training"
        elif self.dataset in ("val", None):
            items = ctx.val_dataset
            which = "validation"
        else:
            return list(self.dataset)
        if items is None:
            raise ValueError(f"Evaluate has no dataset: the trainer got no {which} dataset")
        return list(items)

    async def run(self, ctx: AlgorithmContext) -> EvaluationResult:
        items = self._items(ctx)
        label = self.label or f"evaluation ({self.mode.value})"
        log.info("evaluating %d items in %s mode", len(items), self.mode.value)
        console = self.console or Console()
        rollouts = await ctx.enqueue(items, self.mode)
        with ConsoleProgress(console, label, len(rollouts), unit="rollouts", every_s=10.0,
                             enabled=self.progress) as bar:
            await wait_with_progress(ctx.store, rollouts, bar, timeout=self.timeout)
        rollouts = await ctx.wait(rollouts, timeout=0)
        result = await evaluation_result(ctx, rollouts, mode=self.mode, threshold=self.threshold)
        if self.show:
            console.print(result.table(self.max_rows))
            console.print(Text(result.summary(), style="bold"))
        if self.stop_on_no_success:
            await check_evaluation(ctx.store, rollouts, label)
        return result
