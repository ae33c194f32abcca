"""``GRPOPolicies``: one run, several policies — e.g. one LoRA per agent.

::

    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"])   # one engine, two policies
    algorithm = GRPOPolicies({"planner": "^planner$", "solver": "^solver$"}, GRPOConfig(...))
    Trainer(algorithm=algorithm, gateway=Gateway(engines)).fit(agent, train, val)

The agents pick their policy by model name (``model="solver"``). Every step samples one
batch of groups for all policies; then each policy, in turn, is trained by its **own**
GRPO update on its **own** agents' samples — :class:`~agentbolt.adapters.SampleAdapter`
with that policy's ``agent_match`` — and published to its own engine under its own
version. The advantages are the rollout's, shared: A_i = r_i − mean of the group,
whichever agent's tokens carry it. Metrics are the shared ones (reward, success, groups)
plus each policy's under ``<policy>/...`` (``solver/train/loss``, ``solver/policy_version``,
``solver/agents/solver/tokens_trained``...).

The loop composes :class:`~.algorithm.GRPO`'s public parts: each policy is a GRPO with
its own ``agent_match`` and a :class:`~.algorithm.GRPOLearner` of its own
(:meth:`~.algorithm.GRPO.prepare`); every step, the rollouts are read once
(:meth:`~.algorithm.GRPO.read`: each span parsed once, whatever the number of policies),
then each policy builds its batch (:meth:`~.algorithm.GRPO.batch`) and trains and
publishes (:meth:`~.algorithm.GRPO.train`).

The run around the steps is :class:`~agentbolt.training.run.TrainingRun`'s, with one
directory per policy: its checkpoints (``run_dir/<policy>/``), its export
(``run_dir/<policy>/model``, or ``export_dir/<policy>``), and resuming from the newest
step all policies have a checkpoint of. The run ends as GRPO's does: at ``max_steps``, at
``time_budget_s`` of training, or by ``stop_success_rate`` on the shared success rate.

Every other setting is :class:`~.config.GRPOConfig`'s, the same for all policies
(``agent_match`` is set per policy). Not supported yet: ``schedule="async"``,
data-parallel training.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from agentbolt.algorithms.base import Algorithm, AlgorithmContext
from agentbolt.algorithms.grpo.algorithm import GRPO, GRPOLearner, GRPOResult
from agentbolt.algorithms.grpo.collect import StepRollouts
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.early_stop import SuccessStreak
from agentbolt.algorithms.grpo.groups import GroupScheduler

__all__ = ["GRPOPolicies", "PolicyRun"]

log = logging.getLogger("agentbolt.algorithms.grpo")


@dataclass
class PolicyRun:
    """One policy of the run: its GRPO (settings and adapter) and its learner (weights,
    update, publisher, version)."""

    name: str
    grpo: GRPO
    learner: GRPOLearner
    export_dir: Path | None = None

    @property
    def policy(self) -> Any:
        """Its weights (:class:`~agentbolt.training.policy.Policy`)."""
        return self.learner.policy

    @property
    def update(self) -> Any:
        """Its update (optimizer state): :class:`~.update.PolicyUpdate`."""
        return self.learner.update

    @property
    def version(self) -> int | None:
        """The policy version its engine serves now."""
        return self.learner.version


class GRPOPolicies(Algorithm):
    """GRPO over several named policies of one :class:`~agentbolt.engines.PolicyEngines`
    (see module doc). ``policies`` maps each policy name to its ``agent_match``; ``models``
    optionally gives a policy its starting weights (default: a copy of what its engine serves)."""

    def __init__(self, policies: Mapping[str, str], config: GRPOConfig | None = None, *,
                 models: Mapping[str, Any] | None = None, console: Console | None = None) -> None:
        if not policies:
            raise ValueError("GRPOPolicies needs at least one policy: {'solver': '^solver$', ...}")
        self.config = config or GRPOConfig()
        if self.config.schedule != "sync":
            raise ValueError("GRPOPolicies trains with schedule='sync' only for now")
        self.console = console or Console(stderr=True)
        self.grpos = {name: GRPO(self.config.model_copy(update={"agent_match": pattern}), console=self.console,
                                 model=(models or {}).get(name)) for name, pattern in policies.items()}
        self.runs: dict[str, PolicyRun] = {}

    def configure_gateway(self, config: Any) -> None:
        """The gateway's sampling for RL (see :meth:`GRPO.configure_gateway`)."""
        next(iter(self.grpos.values())).configure_gateway(config)

    def adapter(self, spans: Any) -> list[Any]:
        """What ``Trainer.dev`` shows: every policy's samples, in policy order."""
        return [s for grpo in self.grpos.values() for s in grpo.adapter(spans)]

    # ------------------------------------------------------------------ run
    async def run(self, ctx: AlgorithmContext) -> dict[str, GRPOResult]:
        from agentbolt.algorithms.failures import FailedStepsWatch
        from agentbolt.algorithms.gateway_access import ensure_gateway_llm
        from agentbolt.training.run import TrainingRun

        cfg = self.config
        control = GRPO.gateway_of(ctx)
        training = TrainingRun("GRPO", self.console, run_dir=cfg.run_dir, run_name=cfg.run_name,
                               keep_checkpoints=cfg.keep_checkpoints, policies=list(self.grpos), slug="grpo-policies")
        self.runs = {name: await self._start(name, grpo, control, training.policy_dir(name))
                     for name, grpo in self.grpos.items()}
        first = next(iter(self.grpos.values()))
        failed_steps = FailedStepsWatch(cfg.max_failed_steps, f"GRPO {next(iter(self.grpos))}")
        scheduler = GroupScheduler(ctx, ctx.train_dataset or [], group_size=cfg.group_size, in_flight=cfg.in_flight,
                                   shuffle=cfg.shuffle, seed=cfg.seed, timeout=cfg.rollout_timeout)
        metrics = training.open_metrics(cfg.loggers, ctx.store, cfg)
        await ensure_gateway_llm(ctx)
        results = {name: GRPOResult(steps=0, policy_version=r.version, run_dir=training.policy_dir(name))
                   for name, r in self.runs.items()}
        done = await self._resume(training.resume_policies(cfg.resume), scheduler)
        streak = SuccessStreak(cfg.stop_success_rate, cfg.stop_success_steps)
        try:
            before = None
            if cfg.eval_before and ctx.val_dataset and done == 0:
                before = await training.evaluate(lambda: first.evaluate(ctx, "before training"), 0, self._versions())
            step = done
            for step in training.steps(done, cfg.max_steps, cfg.time_budget_s):
                groups = await scheduler.next_batch(cfg.tasks_per_step, None)
                await control.flush()
                await failed_steps.check(ctx.store, [r for g in groups for r in g.rollouts], step)
                read = await first.read(ctx, groups)  # once for all policies
                values: dict[str, Any] = {}
                for i, run in enumerate(self.runs.values()):
                    values.update(await self._train(ctx, run, read, with_batch_metrics=i == 0))
                values["time/train_s"] = training.training_seconds
                await metrics.log(step, values)
                for name, run in self.runs.items():
                    results[name].history.append(values)
                    if cfg.checkpoint_every and (step % cfg.checkpoint_every == 0 or step == cfg.max_steps):
                        await training.save(step, run.policy, run.update.state_dict(),
                                            {"policy_version": run.version, "scheduler": scheduler.state(),
                                             **run.learner.sync.state()}, of=name)
                self.console.print(f"[bold]GRPO[/] step {step}: " + ", ".join(
                    f"{name} v{run.version}" for name, run in self.runs.items())
                    + f" · training {values['time/train_s']:.0f}s")
                if streak.observe(values.get("success_rate")):
                    log.info("stopping after step %d: %s", step, streak.reason())
                    training.stop(streak.reason())
            after = None
            if cfg.eval_after and ctx.val_dataset:
                after = await training.evaluate(lambda: first.evaluate(ctx, "after training"), step, self._versions())
            for name, run in self.runs.items():
                run.export_dir = await training.export(run.policy, cfg.export_dir, of=name,
                                                       version=run.version)
                results[name].export_dir, results[name].steps = run.export_dir, step
                results[name].policy_version, results[name].before, results[name].after = run.version, before, after
            await scheduler.cancel_pending()  # after a crash they stay: a resumed run picks them up
        finally:
            await training.close()
        for result in results.values():
            result.seconds, result.train_seconds = training.seconds, training.training_seconds
        return results

    def _versions(self) -> dict[str, int | None]:
        """Each policy's version now, as logged with an evaluation (``<policy>/policy_version``)."""
        return {name: run.version for name, run in self.runs.items()}

    async def _resume(self, found: Mapping[str, Any] | None, scheduler: GroupScheduler) -> int:
        """Continue from ``found``, each policy's checkpoint of one step (see
        :meth:`~agentbolt.training.run.TrainingRun.resume_policies`): each policy gets its
        weights and optimizer back and republishes them under a version of its own never
        used before; the task stream continues where it was. 0: nothing to resume."""
        if not found:
            return 0
        for name, run in self.runs.items():
            checkpoint, learner = found[name], run.learner
            learner.policy.load_trainable_state(checkpoint.weights)
            learner.update.load_state_dict(checkpoint.optimizer)
            learner.version = await learner.sync.resume(checkpoint.state, learner.update.steps)
        state = next(iter(found.values())).state
        if "scheduler" in state:
            scheduler.restore(state["scheduler"])
            await scheduler.cancel_lost()
        step: int = next(iter(found.values())).step
        self.console.print(f"[bold]GRPO[/]: resumed at step {step} from " + ", ".join(
            f"{name} {c.path} (version {self.runs[name].version})" for name, c in found.items()))
        return step

    async def _start(self, name: str, grpo: GRPO, control: Any, run_dir: Path) -> PolicyRun:
        """Policy ``name``'s learner (weights, update, publisher), its files in ``run_dir``."""
        from agentbolt.gateway.policy_control import PolicyControl

        scoped = PolicyControl(control, name)
        learner = await grpo.prepare(scoped, run_dir)
        learner.version = await scoped.policy_version() or 0
        learner.sync.start(learner.version, learner.update.steps)
        self.console.print(f"[bold]GRPO[/] {name} ({grpo.config.agent_match}): {learner.sync.describe(learner.policy)}")
        return PolicyRun(name, grpo, learner)

    async def _train(self, ctx: AlgorithmContext, run: PolicyRun, read: StepRollouts, *,
                     with_batch_metrics: bool) -> dict[str, Any]:
        """One update of ``run``'s policy on its agents' samples of the step's rollouts
        (plus the batch's shared metrics — reward, success, rollouts — when asked)."""
        batch = run.grpo.batch(read)
        values: dict[str, Any] = batch.metrics(self.config.success_threshold) if with_batch_metrics else {}
        trained = await run.grpo.train(run.learner, batch, offered=read.rollout_ids)
        if not trained["samples/trained"]:
            log.info("policy %s: no sample with signal this step (no call of its agents, or equal rewards)", run.name)
        values.update({f"{run.name}/{key}": value for key, value in trained.items()})
        return values
