"""``GRPO``: the agent learns from its own rollouts.

One step, in the order the code runs it (:meth:`GRPO.step`, made of public parts a
loop over several policies composes too: :class:`~.policies.GRPOPolicies`):

1. **sample** — the scheduler (:mod:`.groups`) hands over ``tasks_per_step`` complete
   groups of ``group_size`` rollouts each (sync: a fresh batch; async: the first to
   finish, the rest keep running); with ``group_reward`` (an LLM judge, :mod:`agentbolt.rewards`)
   each group is scored now, the judge's scores becoming the rollouts' rewards;
2. **samples** (:meth:`GRPO.read`, :meth:`GRPO.batch`: :mod:`.collect`) — each finished
   rollout's spans are parsed into model calls once (recorded by the gateway with the
   engine's token ids), which are merged by lineage (exact token prefixes) into samples by
   :class:`~agentbolt.adapters.SampleAdapter` (what ``Trainer.dev`` previews); with
   ``agent_match`` only the matched agents' tokens carry loss;
3. **advantages** (steps 3 to 5: :meth:`GRPO.train`) — A_i = r_i − mean(r of its group),
   per rollout, copied to its samples; groups whose rewards are all equal are dropped, failed rollouts never enter (but
   the agent program's own failures with ``failure_reward``: :mod:`.failures`)
   (:mod:`.advantages`); rollouts staler than ``max_policy_lag`` are dropped (:mod:`.staleness`);
   every rollout not trained is counted under its reason (``rows/...``: :mod:`.row_accounting`);
4. **update** — PPO-clipped, importance-corrected, per-rollout-normalised loss, AdamW
   (:mod:`.update`, :mod:`.loss`);
5. **publish** — the gateway pauses and drains, the engine loads the new weights and the
   policy version goes up, so every later token carries the version that produced it.

Then metrics (console, ``metrics.jsonl``, the store, optional TensorBoard / W&B / MLflow)
and a checkpoint. Evaluation on the validation set runs before, every ``eval_every``
steps and after (none of it counts as training time: ``time_budget_s``, ``time/train_s``);
the run stops at ``max_steps``, at ``time_budget_s``, or early by ``stop_success_rate``
(:mod:`.early_stop`); the trained policy is exported as a Hugging Face model directory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentbolt.adapters.samples import SampleAdapter, agent_counts
from agentbolt.algorithms.base import Algorithm, AlgorithmContext
from agentbolt.algorithms.evaluate import Evaluate, EvaluationResult, success_gain
from agentbolt.algorithms.failures import FailedStepsWatch
from agentbolt.algorithms.gateway_access import (
    engine_weights,
    ensure_gateway_llm,
    gateway_control,
)
from agentbolt.algorithms.grpo.advantages import apply_advantages, compute_advantages
from agentbolt.algorithms.grpo.collect import (
    GRPOBatch,
    StepRollouts,
    build_batch,
    mean_or_none,
    read_rollouts,
    std_or_none,
)
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.early_stop import SuccessStreak
from agentbolt.algorithms.grpo.groups import Group, GroupScheduler
from agentbolt.algorithms.grpo.onpolicy import TRAIN_SAMPLING, force_training_sampling
from agentbolt.algorithms.grpo.overlong import filter_overlong, truncated_calls
from agentbolt.algorithms.grpo.row_accounting import row_metrics
from agentbolt.algorithms.grpo.step_progress import step_progress
from agentbolt.algorithms.sandbox_metrics import sandbox_metrics
from agentbolt.metrics.rows import why_nothing_trained
from agentbolt.rewards.group import GroupReward, score_groups
from agentbolt.training import distributed as dist
from agentbolt.training import ranks
from agentbolt.training.publish import NoGatewayError, engine_info, policy_device
from agentbolt.training.sync import PolicySync, probe_of

if TYPE_CHECKING:
    from agentbolt.algorithms.grpo.update import PolicyUpdate

__all__ = ["GRPO", "GRPOLearner", "GRPOResult", "NoGatewayError"]

log = logging.getLogger("agentbolt.algorithms.grpo")


RL_SAMPLING: dict[str, dict[str, float]] = {
    "train": dict(TRAIN_SAMPLING),
    "val": {"temperature": 0.0},
    "test": {"temperature": 0.0},
}
"""Sampling GRPO wants the gateway to force per rollout mode."""


@dataclass
class GRPOResult:
    """What a GRPO run did."""

    steps: int
    policy_version: int | None
    run_dir: Path
    before: EvaluationResult | None = None
    after: EvaluationResult | None = None
    export_dir: Path | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    """The metrics of every step of this process's run, in order."""
    seconds: float = 0.0
    """Wall time of the run, evaluations, checkpoints and the export included."""
    train_seconds: float = 0.0
    """Seconds of training: this process's steps, the evaluations between them excluded
    (what ``time_budget_s`` counts)."""

    @property
    def improvement(self) -> float | None:
        """Held-out success rate after minus before (None without both evaluations)."""
        return success_gain(self.before, self.after)


@dataclass
class GRPOLearner:
    """One policy being trained (:meth:`GRPO.prepare`): its weights, its update (optimizer
    state), how it reaches its engine (:class:`~.sync.PolicySync`: publish, versions), and
    the policy version the engine serves now (:meth:`GRPO.train` moves it on)."""

    policy: Any
    update: PolicyUpdate
    sync: PolicySync
    version: int | None = None


class GRPO(Algorithm):
    """Group Relative Policy Optimization for multi-call agents.

    ``model``: the policy to train — a model directory (``"smollm2"`` for the offline
    SmolLM2), a transformers model, or a :class:`~.policy.Policy`; by default a copy of
    the model the in-process transformers engine serves. The engine serving rollouts
    must start from the same weights; GRPO publishes every update to it.

    :meth:`run` is a loop over public parts another loop can compose (as
    :class:`~.policies.GRPOPolicies` does for several policies)::

        control = GRPO.gateway_of(ctx)
        learner = await grpo.prepare(control, run_dir)      # policy, update, publisher
        learner.sync.start(await control.policy_version() or 0, learner.update.steps)
        for step in ...:
            groups = await scheduler.next_batch(n, learner.version)
            await control.flush()
            batch = grpo.batch(await grpo.read(ctx, groups))  # spans parsed once per rollout
            metrics = await grpo.train(learner, batch, offered=[...])  # advantages, update, publish
    """
    data_parallel = True  # under torchrun, ranks > 0 run follow()

    def __init__(self, config: GRPOConfig | None = None, *, model: Any = None, tokenizer: Any = None,
                 console: Console | None = None, group_reward: GroupReward | None = None,
                 **overrides: Any) -> None:
        base = config or GRPOConfig()
        self.config = base.model_copy(update=overrides) if overrides else base
        if overrides:
            self.config = GRPOConfig.model_validate(self.config.model_dump())
        self.model = model
        self.tokenizer = tokenizer
        self.console = console or Console(stderr=True)
        self.policy: Any = None
        self.learner: GRPOLearner | None = None
        """The policy being trained, once :meth:`prepare` built it."""
        self.adapter: SampleAdapter = SampleAdapter(self.config.agent_match)
        """Spans → the samples GRPO trains on (``Trainer.dev`` previews the same)."""
        self.group_reward = group_reward
        """Scores each group once its rollouts finished, before advantages (an LLM judge:
        :mod:`agentbolt.rewards`); None: the rollouts' own rewards."""

    # ------------------------------------------------------------------ setup
    def make_policy(self, control: Any, device: str | None = None) -> Any:
        """The :class:`~agentbolt.training.policy.Policy` to train: ``model`` (loaded or
        wrapped), else a copy of the weights the engine behind ``control`` serves."""
        from agentbolt.training.policy import Policy

        cfg = self.config
        kw: dict[str, Any] = {"lora": cfg.lora, "dtype": cfg.dtype, "keep_reference": cfg.kl_coef > 0 or cfg.log_kl,
                              "gradient_checkpointing": cfg.gradient_checkpointing, "sharding": cfg.sharding,
                              "device": device or policy_device(cfg.device, None)}
        if isinstance(self.model, Policy):
            return self.model
        if isinstance(self.model, (str, Path)):
            return Policy.load(self.model, **kw)
        if self.model is not None:
            return Policy(self.model, self.tokenizer, **kw)
        served = engine_weights(control)  # a copy: the engine keeps serving its own
        if served is not None:
            return Policy(served[0], served[1], **kw)
        raise ValueError("GRPO needs the policy's weights: pass GRPO(model='<model dir>') with the weights the engine "
                         "serves (the engine is in another process, so they cannot be copied from it)")

    @staticmethod
    def gateway_of(ctx: AlgorithmContext) -> Any:
        """The control of the run's gateway (the engine GRPO trains); raises
        :class:`NoGatewayError`, saying what to pass, when the run has none."""
        control = gateway_control(ctx)
        if control is None:
            raise NoGatewayError(
                "GRPO trains the model behind the gateway, and this run has none: give the trainer an engine, e.g. "
                "Trainer(algorithm=GRPO(...), gateway=EngineSpec(kind='transformers', path='smollm2'))"
            )
        return control

    async def prepare(self, control: Any, run_dir: Path) -> GRPOLearner:
        """The policy to train (:meth:`make_policy`, on the device the engine suggests), its
        update and its publisher to the engine behind ``control``, which keeps its files in
        ``run_dir``. Its version is None until the caller starts or resumes its sync."""
        from agentbolt.algorithms.grpo.update import PolicyUpdate

        cfg = self.config
        info = await engine_info(control)
        self.policy = policy = await asyncio.to_thread(self.make_policy, control, policy_device(cfg.device, info))
        sync = PolicySync(control, policy, info, cfg, run_dir)
        self.learner = GRPOLearner(policy, PolicyUpdate(policy, cfg, recompute_old=sync.recompute_old), sync)
        return self.learner

    def configure_gateway(self, config: Any) -> None:
        """Adjust the run's :class:`~agentbolt.gateway.GatewayConfig` before the gateway
        starts (``Trainer`` calls this, wherever the gateway will run).

        Training calls must be drawn from the raw distribution the engine reports logprobs
        of (:mod:`.onpolicy`): temperature and top-p are forced to 1 and every other field
        that reshapes it (top-k, min-p, penalties, logit bias...) is removed, over any
        contrary setting (warned about). Validation is greedy unless the config says
        otherwise. Calls arriving during a weight swap are held rather than turned away."""
        if config.pause_hold_s == 0:  # agents wait out a weight swap instead of getting 429s
            config.pause_hold_s = 60.0
        for mode, forced in RL_SAMPLING.items():
            current = config.sampling.get(mode)
            if current is None:
                config.sampling[mode] = dict(forced)
            elif mode == "train":
                config.sampling[mode] = force_training_sampling(current)

    # ------------------------------------------------------------------ run
    async def run(self, ctx: AlgorithmContext) -> GRPOResult:
        from agentbolt.training.run import TrainingRun

        cfg = self.config
        control = self.gateway_of(ctx)
        run = TrainingRun("GRPO", self.console, run_dir=cfg.run_dir, run_name=cfg.run_name,
                          keep_checkpoints=cfg.keep_checkpoints)
        self._failed_steps = FailedStepsWatch(cfg.max_failed_steps, "GRPO")
        learner = await self.prepare(control, run.run_dir)
        policy, update, sync = learner.policy, learner.update, learner.sync
        self.console.print(f"[bold]GRPO[/]: {sync.describe(policy)}")
        scheduler = GroupScheduler(ctx, ctx.train_dataset or [], group_size=cfg.group_size, in_flight=cfg.in_flight,
                                   shuffle=cfg.shuffle, seed=cfg.seed, timeout=cfg.rollout_timeout)
        metrics = run.open_metrics(cfg.loggers, ctx.store, cfg)
        await ensure_gateway_llm(ctx)
        result = GRPOResult(steps=0, policy_version=None, run_dir=run.run_dir)
        done = 0  # steps trained before this process (a resumed run's)
        learner.version = await control.policy_version() or 0
        found = run.resume_from(cfg.resume)
        if found is not None:
            ranks.announce("resume", path=str(found.path))  # every rank loads it (sharded: together)
            await asyncio.to_thread(_restore, found, policy, update)
            scheduler.restore(found.state["scheduler"])
            await scheduler.cancel_lost()
            done = found.step
            learner.version = await sync.resume(found.state, update.steps)
            self.console.print(f"[bold]GRPO[/]: resumed from {found.path} (step {done}, "
                               f"policy version {learner.version})")
        else:
            if self.model is not None:  # its own weights: the engine must serve them (and keep what it merged in)
                await sync.publisher.adopt_served_base()
                learner.version = await control.policy_version() or 0  # a 16-bit server may have been given the base
            sync.start(learner.version, update.steps)
            if dist.is_distributed() and not policy.sharded:  # every rank starts from rank 0's weights (a fresh LoRA
                ranks.announce("weights", state=policy.trainable_state())  # init is random; sharding copies them)
        streak = SuccessStreak(cfg.stop_success_rate, cfg.stop_success_steps)
        try:
            if cfg.eval_before and ctx.val_dataset and found is None:
                result.before = await run.evaluate(lambda: self.evaluate(ctx, "before training"), 0, learner.version)
            step = done
            with step_progress(self.console, cfg.max_steps, done, cfg.progress and dist.is_main()) as progress:
                for step in run.steps(done, cfg.max_steps, cfg.time_budget_s):
                    values = await self.step(ctx, control, learner, scheduler, step)
                    if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.max_steps and ctx.val_dataset:
                        with run.evaluating():  # not training time
                            values.update((await self.evaluate(ctx, f"step {step}")).metrics(learner.version))
                    values["time/train_s"] = run.training_seconds
                    if streak.observe(values.get("success_rate")):
                        log.info("stopping after step %d: %s", step, streak.reason())
                        run.stop(streak.reason())
                    await metrics.log(step, values)
                    result.history.append(values)
                    if cfg.checkpoint_every and (step % cfg.checkpoint_every == 0 or step == cfg.max_steps):
                        await run.save(step, policy, update.state_dict(), {"policy_version": learner.version,
                                                                           "scheduler": scheduler.state(),
                                                                           **sync.state()},
                                       sharded_optimizer=update.optimizer)
                    progress(step, values)
            result.steps = step
            result.policy_version = learner.version
            if cfg.eval_after and ctx.val_dataset:
                result.after = await run.evaluate(lambda: self.evaluate(ctx, "after training"), step,
                                                  learner.version)
            result.export_dir = await run.export(policy, cfg.export_dir)
            await scheduler.cancel_pending()  # after a crash they stay: a resumed run picks them up
        finally:
            ranks.stop()  # followers stop
            await run.close()
        result.seconds, result.train_seconds = run.seconds, run.training_seconds
        return result

    async def follow(self) -> None:
        """Data-parallel ranks other than 0: build the same policy, then take part in
        everything rank 0 announces (:mod:`agentbolt.training.ranks`) — every update, and,
        when the policy is sharded, every read of it (publishing, the probe, checkpoints,
        the export) — until it says stop."""
        from agentbolt.algorithms.grpo.update import PolicyUpdate
        from agentbolt.training.checkpoint import CheckpointManager

        if self.model is None:
            raise ValueError("data-parallel GRPO needs GRPO(model=...) on every rank (the weights to start from)")
        policy = self.policy = await asyncio.to_thread(self.make_policy, None)
        update = PolicyUpdate(policy, self.config)

        def train(samples: list[Any], version: int | None, recompute_old: bool) -> None:
            update.recompute_old = recompute_old
            update.step(samples, current_version=version)

        await ranks.follow({
            **ranks.policy_reads(policy, update.optimizer), "update": train,
            "resume": lambda path: _restore(CheckpointManager.load(path), policy, update),
            "weights": policy.load_trainable_state,
        })

    # ------------------------------------------------------------------ one step
    async def step(self, ctx: AlgorithmContext, control: Any, learner: GRPOLearner, scheduler: GroupScheduler,
                   step: int) -> dict[str, Any]:
        """Step ``step`` of :meth:`run`: sample a batch of groups, judge them (with
        ``group_reward``), read and batch them, train and publish; its metrics."""
        cfg = self.config
        t0 = time.perf_counter()
        groups = await scheduler.next_batch(cfg.tasks_per_step, learner.version)
        t_sampled = time.perf_counter()
        offered = [r.rollout_id for g in groups for r in g.rollouts]
        await control.flush()
        await self._failed_steps.check(ctx.store, [r for g in groups for r in g.rollouts], step)
        judged: dict[str, float] = {}
        if self.group_reward is not None:  # the judge's scores become the rewards; unscored groups sit out
            scoring = await score_groups(ctx.store, self.group_reward, [g.rollouts for g in groups])
            for index, rollouts in zip(scoring.kept, scoring.groups, strict=True):
                groups[index].rollouts = rollouts
            groups, judged = [groups[i] for i in scoring.kept], scoring.metrics()
        batch = await self.collect(ctx, groups)
        values: dict[str, Any] = {"policy_version": learner.version, **batch.metrics(cfg.success_threshold), **judged}
        values.update(await sandbox_metrics(ctx.store, [r.rollout_id for g in groups for r in g.rollouts]))
        values.update(await self.train(learner, batch, offered=offered))
        if not values["samples/trained"]:
            log.warning("step %d trained nothing: %s", step, why_nothing_trained(values))
        values.update({"time/sample_s": t_sampled - t0, "time/step_s": time.perf_counter() - t0,
                       "policy_version": learner.version})
        return values

    async def read(self, ctx: AlgorithmContext, groups: Sequence[Group]) -> StepRollouts:
        """The store half of a batch, once per step whatever the number of policies:
        each rollout's group member and its latest attempt's model calls, each span
        parsed once (:func:`~.collect.read_rollouts`). Flush the gateway first."""
        return await read_rollouts(ctx.store, groups, self.config.failure_reward)

    def batch(self, read: StepRollouts) -> GRPOBatch:
        """This GRPO's batch (its ``agent_match``) of a step's rollouts (:func:`~.collect.build_batch`)."""
        return build_batch(read, self.adapter)

    async def collect(self, ctx: AlgorithmContext, groups: Sequence[Group]) -> GRPOBatch:
        """:meth:`read`, then :meth:`batch`."""
        return self.batch(await self.read(ctx, groups))

    async def train(self, learner: GRPOLearner, batch: GRPOBatch, *, offered: Sequence[str]) -> dict[str, Any]:
        """Advantages, one update of ``learner`` on ``batch`` and its publication (its
        version moves on), or nothing when no sample carries signal; the metrics
        (``advantage/...``, ``staleness/...``, ``rows/...``, ``train/...``, ``publish/...``,
        ``samples/trained``, ``policy_version``). ``offered``: the ids of every rollout the
        step sampled (each one not trained is counted under its reason)."""
        cfg = self.config
        advantages = compute_advantages(batch.members, scale_std=cfg.scale_std, leave_one_out=cfg.leave_one_out)
        samples = apply_advantages(batch.samples, advantages)
        values: dict[str, Any] = {"samples/truncated_calls": truncated_calls(samples)}
        samples = kept = filter_overlong(samples, cfg.overlong)
        A = list(advantages.by_rollout.values())
        values.update({
            "groups/dropped_equal": advantages.dropped_groups,
            "groups/kept": len(batch.members) - advantages.dropped_groups,
            "rollouts/failed": advantages.failed_rollouts, "advantage/mean": mean_or_none(A),
            "advantage/std": std_or_none(A), "advantage/abs_mean": mean_or_none([abs(a) for a in A]),
        })
        split = learner.sync.split(samples, learner.version)
        if split is not None:
            samples = split.fresh
            values.update({"staleness/max_lag": split.max_lag, "staleness/dropped_rollouts": len(split.stale_rollouts),
                           "staleness/unknown_version_rollouts": len(split.unknown_rollouts)})
        values["samples/trained"] = len(samples)
        values.update(row_metrics(offered, batch.members, batch.refused, batch.samples, advantages, kept, split,
                                  samples))
        for agent, counts in agent_counts(samples).items():
            values.update({f"agents/{agent}/{key}": n for key, n in counts.items()})
        t_update = time.perf_counter()
        if samples:
            update = learner.update
            ranks.announce("update", samples=samples, version=learner.version, recompute_old=update.recompute_old)
            stats = await asyncio.to_thread(update.step, samples, current_version=learner.version)
            values.update(stats.as_metrics())
            t_sync = time.perf_counter()
            learner.version, published = await learner.sync.publish(learner.version, update.steps, probe_of(samples))
            values.update(published)
            values["time/sync_s"] = time.perf_counter() - t_sync
        values.update({"time/update_s": time.perf_counter() - t_update, "policy_version": learner.version})
        return values

    async def evaluate(self, ctx: AlgorithmContext, when: str) -> EvaluationResult:
        """Run the validation set greedily and print the headline (``when``: e.g. "before training")."""
        result = await Evaluate("val", threshold=self.config.success_threshold, show=False, console=self.console,
                                progress=self.config.progress and dist.is_main(),
                                label=f"GRPO held-out {when}").run(ctx)
        self.console.print(f"[bold]GRPO[/] held-out {when}: {result.headline()}")
        return result


def _restore(found: Any, policy: Any, update: PolicyUpdate) -> None:
    """A checkpoint's weights and optimizer state into ``policy`` and ``update`` (every rank)."""
    ranks.load_checkpoint(found, policy, update.optimizer)
    update.load_state_dict(found.optimizer)
