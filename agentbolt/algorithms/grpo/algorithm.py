"""``GRPO``: the agent learns from its own rollouts.

One step, in the order the code runs it (:meth:`GRPO._step`):

1. **sample** — the scheduler (:mod:`.groups`) hands over ``tasks_per_step`` complete
   groups of ``group_size`` rollouts each (sync: a fresh batch; async: the first to
   finish, the rest keep running); with ``group_reward`` (an LLM judge, :mod:`agentbolt.rewards`)
   each group is scored now, the judge's scores becoming the rollouts' rewards;
2. **samples** — each finished rollout's model calls (recorded by the gateway with the
   engine's token ids) are merged by lineage (exact token prefixes) into samples by
   :class:`~agentbolt.adapters.SampleAdapter` (what ``Trainer.dev`` previews); with
   ``agent_match`` only the matched agents' tokens carry loss;
3. **advantages** — A_i = r_i − mean(r of its group), per rollout, copied to its samples;
   groups whose rewards are all equal are dropped, failed rollouts never enter (but
   the agent program's own failures with ``failure_reward``: :mod:`.failures`)
   (:mod:`.advantages`); rollouts staler than ``max_policy_lag`` are dropped (:mod:`.staleness`);
   every rollout not trained is counted under its reason (``rows/...``: :mod:`.row_accounting`);
4. **update** — PPO-clipped, importance-corrected, per-rollout-normalised loss, AdamW
   (:mod:`.update`, :mod:`.loss`);
5. **publish** — the gateway pauses and drains, the engine loads the new weights and the
   policy version goes up, so every later token carries the version that produced it.

Then metrics (console, ``metrics.jsonl``, the store, optional TensorBoard / W&B / MLflow)
and a checkpoint. Evaluation on the validation set runs before, every ``eval_every``
steps and after; the trained policy is exported as a Hugging Face model directory.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from agentbolt.adapters.samples import (
    RolloutSamples,
    Sample,
    SampleAdapter,
    agent_counts,
)
from agentbolt.algorithms.base import Algorithm, AlgorithmContext
from agentbolt.algorithms.evaluate import Evaluate, EvaluationResult, success_gain
from agentbolt.algorithms.failures import FailedStepsWatch
from agentbolt.algorithms.gateway_access import (
    engine_weights,
    ensure_gateway_llm,
    gateway_control,
)
from agentbolt.algorithms.grpo.advantages import (
    GroupMember,
    apply_advantages,
    compute_advantages,
)
from agentbolt.algorithms.grpo.config import GRPOConfig
from agentbolt.algorithms.grpo.failures import program_failure
from agentbolt.algorithms.grpo.groups import Group, GroupScheduler
from agentbolt.algorithms.grpo.merging import merge_metrics
from agentbolt.algorithms.grpo.onpolicy import (
    TRAIN_SAMPLING,
    OffPolicySamplingError,
    force_training_sampling,
    off_policy_calls,
    refusal,
)
from agentbolt.algorithms.grpo.overlong import filter_overlong, truncated_calls
from agentbolt.algorithms.grpo.row_accounting import row_metrics
from agentbolt.algorithms.grpo.step_progress import step_progress
from agentbolt.algorithms.sandbox_metrics import sandbox_metrics
from agentbolt.metrics.rows import DropReason, why_nothing_trained
from agentbolt.rewards.group import GroupReward, score_groups
from agentbolt.training import distributed as dist
from agentbolt.training.publish import NoGatewayError, engine_info, policy_device
from agentbolt.training.sync import PolicySync, probe_of
from agentbolt.types import Rollout, RolloutStatus

__all__ = ["GRPO", "GRPOResult", "NoGatewayError"]

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

    @property
    def improvement(self) -> float | None:
        """Held-out success rate after minus before (None without both evaluations)."""
        return success_gain(self.before, self.after)


class GRPO(Algorithm):
    """Group Relative Policy Optimization for multi-call agents.

    ``model``: the policy to train — a model directory (``"smollm2"`` for the offline
    SmolLM2), a transformers model, or a :class:`~.policy.Policy`; by default a copy of
    the model the in-process transformers engine serves. The engine serving rollouts
    must start from the same weights; GRPO publishes every update to it.
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
        self.adapter: SampleAdapter = SampleAdapter(self.config.agent_match)
        """Spans → the samples GRPO trains on (``Trainer.dev`` previews the same)."""
        self.group_reward = group_reward
        """Scores each group once its rollouts finished, before advantages (an LLM judge:
        :mod:`agentbolt.rewards`); None: the rollouts' own rewards."""

    # ------------------------------------------------------------------ setup
    def _make_policy(self, control: Any, device: str | None = None) -> Any:
        from agentbolt.training.fsdp import for_fit
        from agentbolt.training.policy import Policy

        cfg = self.config
        kw: dict[str, Any] = {"lora": cfg.lora, "dtype": cfg.dtype, "keep_reference": cfg.kl_coef > 0 or cfg.log_kl,
                              "gradient_checkpointing": cfg.gradient_checkpointing, "sharding": for_fit(cfg.sharding),
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
    def _control(ctx: AlgorithmContext) -> Any:
        control = gateway_control(ctx)
        if control is None:
            raise NoGatewayError(
                "GRPO trains the model behind the gateway, and this run has none: give the trainer an engine, e.g. "
                "Trainer(algorithm=GRPO(...), gateway=EngineSpec(kind='transformers', path='smollm2'))"
            )
        return control

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
        from agentbolt.algorithms.grpo.update import PolicyUpdate
        from agentbolt.training.run import TrainingRun

        cfg = self.config
        control = self._control(ctx)
        run = TrainingRun("GRPO", self.console, run_dir=cfg.run_dir, run_name=cfg.run_name,
                          keep_checkpoints=cfg.keep_checkpoints)
        run_dir = run.run_dir
        self._failed_steps = FailedStepsWatch(cfg.max_failed_steps, "GRPO")
        info = await engine_info(control)
        self.policy = policy = await asyncio.to_thread(self._make_policy, control, policy_device(cfg.device, info))
        self._sync = sync = PolicySync(control, policy, info, cfg, run_dir)
        update = PolicyUpdate(policy, cfg, recompute_old=sync.recompute_old)
        self.console.print(f"[bold]GRPO[/]: {sync.describe(policy)}")
        scheduler = GroupScheduler(ctx, ctx.train_dataset or [], group_size=cfg.group_size, in_flight=cfg.in_flight,
                                   shuffle=cfg.shuffle, seed=cfg.seed, timeout=cfg.rollout_timeout)
        metrics = run.open_metrics(cfg.loggers, ctx.store, cfg)
        await ensure_gateway_llm(ctx)
        result = GRPOResult(steps=0, policy_version=None, run_dir=run_dir)
        done = 0  # steps trained before this process (a resumed run's)
        version = await control.policy_version() or 0
        found = run.resume_from(cfg.resume)
        if found is not None:
            policy.load_trainable_state(found.weights)
            update.load_state_dict(found.optimizer)
            scheduler.restore(found.state["scheduler"])
            await scheduler.cancel_lost()
            done = found.step
            version = await sync.resume(found.state, update.steps)
            dist.broadcast_object({"resume": str(found.path)})
            self.console.print(f"[bold]GRPO[/]: resumed from {found.path} (step {done}, policy version {version})")
        else:
            if self.model is not None:  # its own weights: the engine must serve them (and keep what it merged in)
                await sync.publisher.adopt_served_base()
                version = await control.policy_version() or 0  # a 16-bit server may have been given the base
            sync.start(version, update.steps)
            if dist.is_distributed():  # every rank starts from rank 0's weights (a fresh LoRA init is random)
                dist.broadcast_object({"weights": policy.trainable_state()})
        try:
            if cfg.eval_before and ctx.val_dataset and found is None:
                result.before = await run.evaluate(lambda: self._evaluate(ctx, "before training"), 0, version)
            step = done
            with step_progress(self.console, cfg.max_steps, done, cfg.progress and dist.is_main()) as progress:
                for step in run.steps(done, cfg.max_steps, cfg.time_budget_s):
                    values, version = await self._step(ctx, control, policy, update, scheduler, step, version)
                    if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.max_steps and ctx.val_dataset:
                        values.update((await self._evaluate(ctx, f"step {step}")).metrics(version))
                    await metrics.log(step, values)
                    result.history.append(values)
                    if cfg.checkpoint_every and (step % cfg.checkpoint_every == 0 or step == cfg.max_steps):
                        await run.save(step, policy, update.state_dict(),
                                       {"policy_version": version, "scheduler": scheduler.state(), **sync.state()})
                    progress(step, values)
            result.steps = step
            result.policy_version = version
            if cfg.eval_after and ctx.val_dataset:
                result.after = await run.evaluate(lambda: self._evaluate(ctx, "after training"), step, version)
            result.export_dir = await run.export(policy, cfg.export_dir)
            await _cancel_pending(ctx, scheduler)  # after a crash they stay: a resumed run picks them up
        finally:
            dist.broadcast_object(None)  # followers stop
            await run.close()
        result.seconds = run.seconds
        return result

    async def follow(self) -> None:
        """Data-parallel ranks other than 0: build the same policy, then take part in
        every update rank 0 broadcasts, until it says stop."""
        from agentbolt.algorithms.grpo.update import PolicyUpdate
        from agentbolt.training.checkpoint import CheckpointManager

        if self.model is None:
            raise ValueError("data-parallel GRPO needs GRPO(model=...) on every rank (the weights to start from)")
        policy = self.policy = await asyncio.to_thread(self._make_policy, None)
        update = PolicyUpdate(policy, self.config)
        while True:
            message = await asyncio.to_thread(dist.broadcast_object, None)
            if message is None:
                return
            if "resume" in message:
                found = CheckpointManager.load(message["resume"])
                policy.load_trainable_state(found.weights)
                update.load_state_dict(found.optimizer)
                continue
            if "weights" in message:
                policy.load_trainable_state(message["weights"])
                continue
            update.recompute_old = bool(message.get("recompute_old", update.recompute_old))
            await asyncio.to_thread(update.step, message["samples"], current_version=message["version"])

    # ------------------------------------------------------------------ one step
    async def _step(self, ctx: AlgorithmContext, control: Any, policy: Any, update: Any,
                    scheduler: GroupScheduler, step: int, version: int | None) -> tuple[dict[str, Any], int | None]:
        cfg = self.config
        t0 = time.perf_counter()
        groups = await scheduler.next_batch(cfg.tasks_per_step, version)
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
        batch = await self._collect(ctx, groups)
        values: dict[str, Any] = {"policy_version": version, **batch.metrics(cfg.success_threshold), **judged}
        values.update(await sandbox_metrics(ctx.store, [r.rollout_id for g in groups for r in g.rollouts]))
        advantages = compute_advantages(batch.members, scale_std=cfg.scale_std, leave_one_out=cfg.leave_one_out)
        samples = apply_advantages(batch.samples, advantages)
        values["samples/truncated_calls"] = truncated_calls(samples)
        samples = kept = filter_overlong(samples, cfg.overlong)
        A = list(advantages.by_rollout.values())
        values.update({
            "groups/dropped_equal": advantages.dropped_groups,
            "groups/kept": len(batch.members) - advantages.dropped_groups,
            "rollouts/failed": advantages.failed_rollouts, "advantage/mean": _mean(A), "advantage/std": _std(A),
            "advantage/abs_mean": _mean([abs(a) for a in A]),
        })
        split = self._sync.split(samples, version)
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
            dist.broadcast_object({"samples": samples, "version": version, "recompute_old": update.recompute_old})
            stats = await asyncio.to_thread(update.step, samples, current_version=version)
            values.update(stats.as_metrics())
            t_sync = time.perf_counter()
            version, published = await self._sync.publish(version, update.steps, probe_of(samples))
            values.update(published)
            values["time/sync_s"] = time.perf_counter() - t_sync
        else:
            log.warning("step %d trained nothing: %s", step, why_nothing_trained(values))
        values.update({"time/sample_s": t_sampled - t0, "time/update_s": time.perf_counter() - t_update,
                       "time/step_s": time.perf_counter() - t0, "policy_version": version})
        return values, version

    async def _collect(self, ctx: AlgorithmContext, groups: Sequence[Group]) -> _Batch:
        batch = _Batch()
        for g in groups:
            members = []
            for r in g.rollouts:
                member = GroupMember.from_rollout(r)
                if member.failed and not await self._penalised(ctx, r):
                    members.append(member)
                    batch.rewards.append(r.reward)
                    continue
                if member.failed:  # the program's own failure, with failure_reward set
                    member = GroupMember(r.rollout_id, self.config.failure_reward)
                    batch.program_failures += 1
                members.append(member)
                batch.rewards.append(member.reward)
                try:
                    found = await _rollout_samples(ctx, r.rollout_id, self.adapter)
                except OffPolicySamplingError as exc:  # sampled otherwise than the ratio assumes
                    if not batch.off_policy:
                        log.warning("%s", exc)
                    batch.off_policy += 1
                    batch.refused[r.rollout_id] = "off_policy"
                    if not batch.per_rollout and batch.off_policy == sum(len(x.rollouts) for x in groups):
                        raise  # every rollout of the step: the gateway is set up wrong, say so
                    continue
                if found is None:
                    batch.no_calls += 1
                    if r.status == RolloutStatus.FAILED:  # no call succeeded: infrastructure, not the program
                        members[-1], batch.rewards[-1] = GroupMember(r.rollout_id, None, failed=True), r.reward
                        batch.program_failures -= 1
                    batch.refused[r.rollout_id] = "no_model_call"
                    continue
                batch.per_rollout.append(found)
                batch.samples.extend(found.samples)
            batch.members[g.group_id] = members
        if batch.no_calls:  # they train nothing: say why, once a step
            from agentbolt.adapters.no_model_call import left_out
            log.warning("%s", left_out("GRPO", batch.no_calls, len(batch.rewards)))
        return batch

    async def _penalised(self, ctx: AlgorithmContext, rollout: Rollout) -> bool:
        """Whether a failed rollout enters its group with ``failure_reward`` (:mod:`.failures`)."""
        if self.config.failure_reward is None or rollout.latest_attempt_id is None:
            return False
        return program_failure(rollout, await ctx.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id))

    async def _evaluate(self, ctx: AlgorithmContext, when: str) -> EvaluationResult:
        result = await Evaluate("val", threshold=self.config.success_threshold, show=False, console=self.console,
                                progress=self.config.progress and dist.is_main(),
                                label=f"GRPO held-out {when}").run(ctx)
        self.console.print(f"[bold]GRPO[/] held-out {when}: {result.headline()}")
        return result


@dataclass
class _Batch:
    members: dict[str, list[GroupMember]] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    per_rollout: list[RolloutSamples] = field(default_factory=list)
    rewards: list[float | None] = field(default_factory=list)
    no_calls: int = 0
    off_policy: int = 0
    """Rollouts refused because a training call was sampled otherwise than the ratio assumes."""
    program_failures: int = 0
    """Failed rollouts trained with ``failure_reward`` (the agent program's own failure)."""
    refused: dict[str, DropReason] = field(default_factory=dict)
    """Rollouts that built no sample: refused as ``off_policy``, or with ``no_model_call``."""

    def metrics(self, threshold: float) -> dict[str, Any]:
        scored = [r for r in self.rewards if r is not None]
        return {
            "reward/mean": _mean(scored), "reward/std": _std(scored),
            "success_rate": _mean([1.0 if r >= threshold else 0.0 for r in scored]),
            "rollouts/total": len(self.rewards), "rollouts/no_model_calls": self.no_calls,
            "rollouts/off_policy_sampling": self.off_policy, "rollouts/program_failures": self.program_failures,
            "samples/total": len(self.samples), **merge_metrics(self.per_rollout),
        }


async def _rollout_samples(ctx: AlgorithmContext, rollout_id: str, adapter: SampleAdapter) -> RolloutSamples | None:
    """The samples of a finished rollout's latest attempt; None when it made no model call
    that succeeded. The step flushed the gateway first: its spans are all in the store."""
    from agentbolt.adapters.calls import extract_model_calls

    spans = await ctx.store.get_spans(rollout_id, "latest")
    if all(c.failed for c in extract_model_calls(spans)):
        return None
    found = adapter.adapt(spans)
    mismatched = off_policy_calls(spans, [i for s in found[-1].samples for i in s.span_ids]) if found else {}
    if mismatched:
        raise OffPolicySamplingError(refusal(rollout_id, mismatched))
    return found[-1] if found else None


async def _cancel_pending(ctx: AlgorithmContext, scheduler: GroupScheduler) -> None:
    """Groups still in flight when the run ends are not needed: cancel their rollouts."""
    for group in scheduler.pending:
        for rid in group.rollout_ids:
            try:
                await ctx.store.cancel_rollout(rid)
            except Exception as exc:  # noqa: BLE001 — finished meanwhile, or the store is going away
                log.debug("could not cancel rollout %s: %s", rid, exc)


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _std(xs: Sequence[float]) -> float | None:
    return statistics.pstdev(xs) if len(xs) > 1 else (0.0 if xs else None)

