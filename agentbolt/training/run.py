"""``TrainingRun``: the skeleton every weight-training run shares (GRPO, SFT, later ones).

Around an algorithm's own steps, a run always does the same things, in this order:

1. a **run directory** (``run_dir``, or ``runs/<name>-<time>``) and a **run id** (``run_name``,
   or the directory's name) that names it in metrics and checkpoints;
2. **resume**: the newest checkpoint under ``run_dir/checkpoints`` when ``resume`` is set
   (what it holds besides the weights is the algorithm's business);
3. **metrics** to the configured sinks (jsonl, store, tensorboard...), closed at the end;
4. a held-out **evaluation** before training (step 0) and after it (the last step), each
   logged with the policy version it evaluated;
5. the **steps** themselves: ``done + 1 .. total``, ended early once ``time_budget_s`` of
   training is spent or when the algorithm says :meth:`~TrainingRun.stop`. Training time
   is the steps' own: from the first step to the end of the last, less the evaluations
   run between them (:meth:`~TrainingRun.evaluate`, :meth:`~TrainingRun.evaluating`) —
   :attr:`~TrainingRun.training_seconds`, what a run reports as "training X s";
6. **checkpoints** after steps (the trainable weights, the optimizer, the run state;
   a sharded policy's as shards every rank writes);
7. the **export** of the trained policy (``export_dir``, or ``run_dir/model``; a sharded
   policy gathered by every rank, written by rank 0) and the run's wall time for its result.

A run may train **several policies** (``policies=["planner", "solver"]``, one LoRA per
agent): each keeps its files in ``run_dir/<policy>/`` (checkpoints, published versions,
LoRAs) and is exported to ``export_dir/<policy>`` (or ``run_dir/<policy>/model``); a
resumed run continues from the newest step *every* policy has a checkpoint of (they are
saved one after the other, so a crash between two saves leaves one policy a step ahead);
an evaluation is logged with each policy's version (``<policy>/policy_version``).

An algorithm keeps only its own idea — what one step does — and calls these in its
``run``. The evaluation is the algorithm's (anything whose result has
``metrics(version)``); this floor knows no algorithm.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agentbolt.training import ranks
from agentbolt.training.checkpoint import Checkpoint, CheckpointManager

__all__ = ["Evaluated", "TrainingRun"]

log = logging.getLogger("agentbolt.training")


class Evaluated(Protocol):
    """An evaluation's result, as a run logs it."""

    def metrics(self, version: int | None) -> Mapping[str, Any]: ...


E = TypeVar("E", bound=Evaluated)


class TrainingRun:
    """One training run's directory, id, checkpoints, metrics, evaluations and export.

    ``name`` (``"GRPO"``, ``"SFT"``) prefixes its console lines and, unless ``slug`` is
    given, the default directory (``runs/grpo-20261202-013000``). ``policies``: the names
    of the policies of a run that trains several (see the module doc)."""

    def __init__(self, name: str, console: Any, *, run_dir: str | None, run_name: str | None,
                 keep_checkpoints: int = 2, policies: Sequence[str] = (), slug: str | None = None) -> None:
        self.name = name
        self.console = console
        self.t_start = time.perf_counter()
        self.run_dir = Path(run_dir or f"runs/{slug or name.lower()}-{time.strftime('%Y%m%d-%H%M%S')}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_id = run_name or self.run_dir.name
        self.checkpoints = CheckpointManager(self.run_dir, keep=keep_checkpoints)
        self.policy_checkpoints = {p: CheckpointManager(self.policy_dir(p), keep=keep_checkpoints) for p in policies}
        """Each policy's checkpoints (``run_dir/<policy>/checkpoints``), in a run of several."""
        for p in policies:
            self.policy_dir(p).mkdir(exist_ok=True)
        self.metrics: Any = None
        self._train_start: float | None = None  # when the first step started (time.monotonic)
        self._train_end: float | None = None  # when the steps ended
        self._eval_s = 0.0  # evaluations run between the steps
        self._stop: str | None = None  # why the algorithm ended the steps (stop)

    def policy_dir(self, policy: str) -> Path:
        """``run_dir/<policy>``: one policy's files in a run of several."""
        return self.run_dir / policy

    # ------------------------------------------------------------------ resume, metrics
    def resume_from(self, resume: bool) -> Checkpoint | None:
        """The newest complete checkpoint of this run directory, when ``resume`` is set."""
        return self.checkpoints.latest() if resume else None

    def resume_policies(self, resume: bool) -> dict[str, Checkpoint] | None:
        """In a run of several policies, when ``resume`` is set: each policy's checkpoint of
        the newest step that every policy has one of (None: no such step)."""
        if not resume or not self.policy_checkpoints:
            return None
        saved = {p: {path.name: path for path in m.list()} for p, m in self.policy_checkpoints.items()}
        common = sorted(set.intersection(*(set(steps) for steps in saved.values())))
        if not common:
            if any(saved.values()):
                log.warning("not resuming: the policies %s have no checkpoint of a common step",
                            sorted(p for p, steps in saved.items() if steps))
            return None
        return {p: CheckpointManager.load(steps[common[-1]]) for p, steps in saved.items()}

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
    async def evaluate(self, evaluate: Callable[[], Awaitable[E]], step: int,
                       version: int | Mapping[str, int | None] | None) -> E:
        """Run ``evaluate`` and log its metrics at ``step`` under the policy ``version`` —
        in a run of several policies, ``{policy: version}``, logged as ``<policy>/policy_version``.
        Its time is not training time (:attr:`training_seconds`)."""
        with self.evaluating():
            result = await evaluate()
        if isinstance(version, Mapping):
            await self.metrics.log(step, {**result.metrics(None),
                                          **{f"{p}/policy_version": v for p, v in version.items()}})
        else:
            await self.metrics.log(step, result.metrics(version))
        return result

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """Time spent inside is evaluation, not training: left out of :attr:`training_seconds`
        and of the time budget (for an evaluation an algorithm runs and logs itself, such as
        GRPO's ``eval_every``; :meth:`evaluate` uses it)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            if self._train_start is not None and self._train_end is None:  # between the steps
                self._eval_s += time.monotonic() - t0

    @property
    def training_seconds(self) -> float:
        """Seconds of training: from the start of the first step of :meth:`steps` to the end
        of the last (or now, while they run), less the evaluations between them; 0 before."""
        if self._train_start is None:
            return 0.0
        end = time.monotonic() if self._train_end is None else self._train_end
        return end - self._train_start - self._eval_s

    def stop(self, reason: str) -> None:
        """End :meth:`steps` after the current step (an algorithm's own rule: e.g. GRPO's
        ``stop_success_rate``); ``reason`` is said on the console."""
        self._stop = reason

    def steps(self, done: int, total: int, time_budget_s: float | None) -> Iterator[int]:
        """The steps ``done + 1 .. total``; none after ``time_budget_s`` seconds of training
        (:attr:`training_seconds`: evaluations excluded) or after :meth:`stop` (either said
        on the console)."""
        self._train_start, self._train_end, self._eval_s, self._stop = time.monotonic(), None, 0.0, None
        step = done
        try:
            while step < total:
                if self._stop is not None:
                    self.console.print(f"[bold]{self.name}[/]: stopped after {step} steps "
                                       f"({self.training_seconds:.0f} s of training): {self._stop}")
                    return
                if time_budget_s is not None and self.training_seconds > time_budget_s:
                    self.console.print(f"[bold]{self.name}[/]: time budget of {time_budget_s:g} s of training spent "
                                       f"after {step} steps (evaluations excluded)")
                    return
                step += 1
                yield step
        finally:
            self._train_end = time.monotonic()

    async def save(self, step: int, policy: Any, optimizer: dict[str, Any], state: dict[str, Any], *,
                   of: str | None = None, sharded_optimizer: Any = None) -> None:
        """Checkpoint ``step``: the policy's trainable weights, the optimizer state, and
        ``state`` (with the run id), off the event loop — ``of``: which policy of several.
        A sharded policy: every rank writes its shards of the weights and of
        ``sharded_optimizer`` (announced: :mod:`.ranks`), ``optimizer`` holding the rest."""
        checkpoints = self.checkpoints if of is None else self.policy_checkpoints[of]
        state = {**state, "run_id": self.run_id}
        if policy.sharded:
            await asyncio.to_thread(checkpoints.save, step, {}, optimizer, state,
                                    shards=lambda path: ranks.save_shards(policy, sharded_optimizer, path))
            return
        await asyncio.to_thread(checkpoints.save, step, policy.trainable_state(), optimizer, state)

    async def export(self, policy: Any, export_dir: str | None, *, of: str | None = None,
                     version: int | None = None) -> Path:
        """Save the trained policy as a model directory (``export_dir``, or ``run_dir/model``);
        ``of`` (one policy of several, at ``version``): ``export_dir/<of>``, or ``run_dir/<of>/model``."""
        if of is None:
            where, what = export_dir or str(self.run_dir / "model"), "trained policy"
        else:
            where = str(Path(export_dir) / of) if export_dir else str(self.policy_dir(of) / "model")
            what = f"policy {of} (version {version})"
        out = await asyncio.to_thread(ranks.export, policy, where)  # sharded: every rank joins the gather
        self.console.print(f"[bold]{self.name}[/]: {what} saved to {out}")
        return out

    @property
    def seconds(self) -> float:
        """Wall time since the run started."""
        return time.perf_counter() - self.t_start
