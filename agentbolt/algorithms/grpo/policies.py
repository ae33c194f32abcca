"""``GRPOPolicies``: one run, several policies — e.g. one LoRA adapter per agent.

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

The run around the steps is :class:`~agentbolt.training.run.TrainingRun`'s, with one
directory per policy: its checkpoints (``run_dir/<policy>/``), its export
(``run_dir/<policy>/model``, or ``export_dir/<policy>``), and resuming from the newest
step all policies have a checkpoint of.

Every other setting is :class:`~.config.GRPOConfig`'s, the same for all policies
(``agent_match`` is set per policy). Not supported yet: ``schedule="async"``,
data-parallel training.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from agentbolt.adapters.samples import agent_counts
from agentbolt.algorithms.base import Algorithm, AlgorithmContext
from agentbolt.algorithms.grpo.advantages import apply_advantages, compute_advantages
from agentbolt.algorithms.grpo.algorithm import GRPO, GRPOResult, _cancel_pending
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.groups import Group, GroupScheduler
from agentbolt.algorithms.grpo.row_accounting import row_metrics
from agentbolt.training.sync import PolicySync, probe_of

__all__ = ["GRPOPolicies", "PolicyRun"]

log = logging.getLogger("agentbolt.algorithms.grpo")


@dataclass
class PolicyRun:
    """One policy of the run: its GRPO settings and adapter, trainer, update and version."""

    name: str
    grpo: GRPO
    policy: Any
    sync: PolicySync
    update: Any
    version: int | None
    export_dir: Path | None = None


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
        control = GRPO._control(ctx)
        training = TrainingRun("GRPO", self.console, run_dir=cfg.run_dir, run_name=cfg.run_name,
                               keep_checkpoints=cfg.keep_checkpoints, policies=list(self.grpos), slug="grpo-policies")
        self.runs = {name: await self._start(name, grpo, control, training.policy_dir(name))
                     for name, grpo in self.grpos.items()}
        first = next(iter(self.grpos))
        failed_steps = FailedStepsWatch(cfg.max_failed_steps, f"GRPO {first}")
        scheduler = GroupScheduler(ctx, ctx.train_dataset or [], group_size=cfg.group_size, in_flight=cfg.in_flight,
                                   shuffle=cfg.shuffle, seed=cfg.seed, timeout=cfg.rollout_timeout)
        metrics = training.open_metrics(cfg.loggers, ctx.store, cfg)
        await ensure_gateway_llm(ctx)
        results = {name: GRPOResult(steps=0, policy_version=r.version, run_dir=training.policy_dir(name))
                   for name, r in self.runs.items()}
        done = await self._resume(training.resume_policies(cfg.resume), scheduler)
        try:
            before = None
            if cfg.eval_before and ctx.val_dataset and done == 0:
                before = await training.evaluate(lambda: self.grpos[first]._evaluate(ctx, "before training"), 0,
                                                 self._versions())
            step = done
            for step in training.steps(done, cfg.max_steps, cfg.time_budget_s):
                groups = await scheduler.next_batch(cfg.tasks_per_step, None)
                await control.flush()
                await failed_steps.check(ctx.store, [r for g in groups for r in g.rollouts], step)
                values: dict[str, Any] = {}
                for i, run in enumerate(self.runs.values()):
                    values.update(await self._train(ctx, run, groups, with_batch_metrics=i == 0))
                await metrics.log(step, values)
                for name, run in self.runs.items():
                    results[name].history.append(values)
                    if cfg.checkpoint_every and (step % cfg.checkpoint_every == 0 or step == cfg.max_steps):
                        await training.save(step, run.policy, run.update.state_dict(),
                                            {"policy_version": run.version, "scheduler": scheduler.state(),
                                             **run.sync.state()}, of=name)
                self.console.print(f"[bold]GRPO[/] step {step}: " + ", ".join(
                    f"{name} v{run.version}" for name, run in self.runs.items()))
            after = None
            if cfg.eval_after and ctx.val_dataset:
                after = await training.evaluate(lambda: self.grpos[first]._evaluate(ctx, "after training"), step,
                                                self._versions())
            for name, run in self.runs.items():
                run.export_dir = await training.export(run.policy, cfg.export_dir, of=name, version=run.version)
                results[name].export_dir, results[name].steps = run.export_dir, step
                results[name].policy_version, results[name].before, results[name].after = run.version, before, after
            await _cancel_pending(ctx, scheduler)  # after a crash they stay: a resumed run picks them up
        finally:
            await training.close()
        for result in results.values():
            result.seconds = training.seconds
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
            checkpoint = found[name]
            run.policy.load_trainable_state(checkpoint.weights)
            run.update.load_state_dict(checkpoint.optimizer)
            run.version = await run.sync.resume(checkpoint.state, run.update.steps)
        state = next(iter(found.values())).state
        if "scheduler" in state:
            scheduler.restore(state["scheduler"])
            await scheduler.cancel_lost()
        step: int = next(iter(found.values())).step
        self.console.print(f"[bold]GRPO[/]: resumed at step {step} from " + ", ".join(
            f"{name} {c.path} (version {self.runs[name].version})" for name, c in found.items()))
        return step

    async def _start(self, name: str, grpo: GRPO, control: Any, run_dir: Path) -> PolicyRun:
        """Policy ``name``'s trainer, publisher and update, its files in ``run_dir``."""
        from agentbolt.algorithms.grpo.update import PolicyUpdate
        from agentbolt.gateway.policy_control import PolicyControl
        from agentbolt.training.publish import engine_info, policy_device

        scoped = PolicyControl(control, name)
        cfg = grpo.config
        info = await engine_info(scoped)
        policy = await asyncio.to_thread(grpo._make_policy, scoped, policy_device(cfg.device, info))
        grpo.policy = policy
        sync = grpo._sync = PolicySync(scoped, policy, info, cfg, run_dir)
        update = PolicyUpdate(policy, cfg, recompute_old=sync.recompute_old)
        version = await scoped.policy_version() or 0
        sync.start(version, update.steps)
        self.console.print(f"[bold]GRPO[/] {name} ({cfg.agent_match}): {sync.describe(policy)}")
        return PolicyRun(name, grpo, policy, sync, update, version)

    async def _train(self, ctx: AlgorithmContext, run: PolicyRun, groups: list[Group], *,
                     with_batch_metrics: bool) -> dict[str, Any]:
        """One update of ``run``'s policy on its agents' samples of ``groups`` (plus the
        batch's shared metrics — reward, success, rollouts — when asked)."""
        cfg, p = self.config, f"{run.name}/"
        batch = await run.grpo._collect(ctx, groups)
        values: dict[str, Any] = batch.metrics(cfg.success_threshold) if with_batch_metrics else {}
        advantages = compute_advantages(batch.members, scale_std=cfg.scale_std, leave_one_out=cfg.leave_one_out)
        samples = kept = apply_advantages(batch.samples, advantages)
        split = run.sync.split(samples, run.version)
        if split is not None:
            samples = split.fresh
            values[f"{p}staleness/dropped_rollouts"] = len(split.stale_rollouts)
        values[f"{p}samples/trained"] = len(samples)
        offered = [r.rollout_id for g in groups for r in g.rollouts]
        rows = row_metrics(offered, batch.members, batch.refused, batch.samples, advantages, kept, split, samples)
        values.update({f"{p}{key}": n for key, n in rows.items()})
        for agent, counts in agent_counts(samples).items():
            values.update({f"{p}agents/{agent}/{key}": n for key, n in counts.items()})
        if samples:
            stats = await asyncio.to_thread(run.update.step, samples, current_version=run.version)
            values.update(stats.as_metrics(f"{p}train/"))
            run.version, published = await run.sync.publish(run.version, run.update.steps, probe_of(samples))
            values.update({f"{p}{k}": v for k, v in published.items()})
        else:
            log.info("policy %s: no sample with signal this step (no call of its agents, or equal rewards)", run.name)
        values[f"{p}policy_version"] = run.version
        return values
