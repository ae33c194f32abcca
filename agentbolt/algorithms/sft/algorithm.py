"""``SFT``: supervised fine-tuning on good rollouts, and its iterative form, rejection
sampling fine-tuning (RFT).

One iteration, in the order the code runs it (:meth:`SFT._iteration`):

1. **data** — iteration 1 learns from what it was given (``rollouts=``: rollouts already
   in the store, e.g. a teacher's; ``records=``: chat records); every other iteration (or
   iteration 1 without them) **samples** ``samples_per_task`` rollouts per training task
   from the current policy through the gateway (training mode, ``sample_temperature``);
2. **select** — succeeded rollouts with a reward, at or above ``min_reward`` and/or the
   best ``top_k_per_task`` per task (:mod:`.selection`); their model calls become chat
   records (:class:`~agentbolt.adapters.MessagesAdapter`), duplicates dropped; the
   records are written to ``run_dir/records/iteration-N.jsonl``;
3. **tokenize** — rendered as the gateway renders the calls (the model's chat template, the
   gateway's tool description and tool-call format), loss on assistant tokens only (:mod:`.chat_data`);
4. **train** — epochs of AdamW on the per-token mean NLL (:mod:`.update`);
5. **publish** — the gateway pauses and drains, the engine loads the new weights and the
   policy version goes up (without a gateway: the weights are only exported).

Before the first and after the last iteration the validation set is solved greedily
(``result.before`` / ``result.after``); the trained policy is exported as a Hugging Face
model directory. Metrics go to ``run_dir/metrics.jsonl`` and the store; the trained weights
are checkpointed after every iteration, and a second run with the same ``run_dir``
continues after the last finished iteration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from agentbolt.algorithms.base import Algorithm, AlgorithmContext
from agentbolt.algorithms.evaluate import Evaluate, EvaluationResult, success_gain
from agentbolt.algorithms.failures import FailedStepsWatch
from agentbolt.algorithms.gateway_access import (
    engine_weights,
    ensure_gateway_llm,
    gateway_control,
)
from agentbolt.algorithms.progress import ConsoleProgress
from agentbolt.algorithms.sft.config import SFTConfig
from agentbolt.algorithms.sft.selection import (
    NoTrainingDataError,
    dedupe_records,
    load_records,
    select_rollouts,
)
from agentbolt.training import distributed as dist
from agentbolt.training import ranks
from agentbolt.training.publish import NoGatewayError, engine_info, policy_device
from agentbolt.training.sync import PolicySync, PublishSettings, probe_of
from agentbolt.types import Rollout, RolloutMode, RolloutStatus

__all__ = ["SFT", "SFTResult"]

log = logging.getLogger("agentbolt.algorithms.sft")

_CHUNK = 500


@dataclass
class SFTResult:
    """What an SFT run did."""

    iterations: int
    """Iterations finished (resumed ones included)."""
    policy_version: int | None
    run_dir: Path
    n_records: list[int] = field(default_factory=list)
    """Records trained on, per iteration."""
    before: EvaluationResult | None = None
    after: EvaluationResult | None = None
    export_dir: Path | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    """The metrics of every iteration of this process's run, in order."""
    seconds: float = 0.0
    """Wall time of the run, evaluations and the export included."""
    train_seconds: float = 0.0
    """Seconds of training: this process's iterations, evaluations excluded."""

    @property
    def improvement(self) -> float | None:
        """Held-out success rate after minus before (None without both evaluations)."""
        return success_gain(self.before, self.after)


class SFT(Algorithm):
    """Supervised fine-tuning of the served policy on selected rollouts or chat records;
    with ``iterations > 1``, rejection sampling fine-tuning (see the module doc).

    * ``model`` — the weights to train: ``"smollm2"``, a model directory, a transformers
      model (with ``tokenizer``), a :class:`~agentbolt.training.policy.Policy`, or
      None: a copy of the model the in-process transformers engine serves. The engine must
      serve the same weights: every iteration's update is published to it.
    * ``rollouts`` — learn (in iteration 1) from rollouts already in the store: ``"store"``
      (every rollout there when the run starts) or their ids.
    * ``records`` — learn (in iteration 1) from chat records: a JSONL path or a list.

    Under ``torchrun`` rank 0 runs the loop and the other ranks :meth:`follow` it.
    """
    data_parallel = True  # under torchrun, ranks > 0 run follow()

    def __init__(self, config: SFTConfig | None = None, *, model: Any = None, tokenizer: Any = None,
                 rollouts: str | Sequence[str | Rollout] | None = None,
                 records: str | Path | Sequence[dict[str, Any]] | None = None,
                 console: Console | None = None, **overrides: Any) -> None:
        base = config or SFTConfig()
        self.config = SFTConfig.model_validate({**base.model_dump(), **overrides}) if overrides else base
        if isinstance(rollouts, str) and rollouts != "store":
            raise ValueError(f"rollouts={rollouts!r}: use 'store' (every rollout in the store) or a list of rollout "
                             "ids")
        self.rollouts = rollouts
        self.records = records
        self.model = model
        self.tokenizer = tokenizer
        self.console = console or Console(stderr=True)
        self.policy: Any = None
        self._sync: PolicySync | None = None
        self._failed_steps = FailedStepsWatch(self.config.max_failed_steps, "SFT")

    # ------------------------------------------------------------------ setup
    def configure_gateway(self, config: Any) -> None:
        """Validation and test calls are greedy; sampling (training) calls use
        ``sample_temperature`` — each unless the gateway config already sets that mode.
        Calls arriving during a weight swap are held rather than turned away."""
        if config.pause_hold_s == 0:
            config.pause_hold_s = 60.0
        for mode, forced in (("train", {"temperature": self.config.sample_temperature}),
                             ("val", {"temperature": 0.0}), ("test", {"temperature": 0.0})):
            config.sampling.setdefault(mode, forced)

    def _make_policy(self, control: Any, device: str = "cpu") -> Any:
        from agentbolt.training.policy import Policy

        cfg = self.config
        kw: dict[str, Any] = {
            "lora": cfg.lora,
            "dtype": cfg.dtype,
            "gradient_checkpointing": cfg.gradient_checkpointing,
            "sharding": cfg.sharding,
            "device": device,
        }
        if isinstance(self.model, Policy):
            policy = self.model
        elif isinstance(self.model, (str, Path)):
            policy = Policy.load(self.model, **kw)
        elif self.model is not None:
            policy = Policy(self.model, self.tokenizer, **kw)
        else:
            found = engine_weights(control)
            if found is None:
                raise ValueError("SFT needs the policy's weights: pass SFT(model='smollm2' | '<model dir>' | a "
                                 "transformers model) — the weights the engine serves; they can only be copied from "
                                 "an engine in this process")
            policy = Policy(found[0], self.tokenizer or found[1], **kw)
        if policy.tokenizer is None:
            raise ValueError("SFT renders records with the model's chat template and has no tokenizer: pass "
                             "SFT(model=..., tokenizer=...)")
        return policy

    # ------------------------------------------------------------------ run
    async def run(self, ctx: AlgorithmContext) -> SFTResult:
        from agentbolt.algorithms.sft.update import SFTUpdate
        from agentbolt.training.run import TrainingRun

        cfg = self.config
        control = gateway_control(ctx)
        run = TrainingRun("SFT", self.console, run_dir=cfg.run_dir, run_name=cfg.run_name)
        run_dir = run.run_dir
        found = run.resume_from(cfg.resume)
        given = await self._given_rollouts(ctx) if found is None else None  # before this run makes any
        info = await engine_info(control) if control is not None else None
        self.policy = policy = await asyncio.to_thread(self._make_policy, control, policy_device(None, info))
        # publishing, and versions never reused: the same guard as GRPO's (training.sync)
        self._sync = None if info is None or control is None else PolicySync(control, policy, info,
                                                                             PublishSettings(), run_dir)
        if self._sync is not None and self.model is not None and found is None:
            await self._sync.publisher.adopt_served_base()  # its own weights: the engine must serve them
        update = SFTUpdate(policy, cfg)
        if dist.is_distributed() and not policy.sharded and found is None:  # a fresh LoRA's init is random
            ranks.announce("weights", state=policy.trainable_state())  # (sharding copies rank 0's weights)
        metrics = run.open_metrics(cfg.loggers, ctx.store, cfg)
        result = SFTResult(iterations=0, policy_version=None, run_dir=run_dir)
        try:
            version = None
            if control is not None:
                await ensure_gateway_llm(ctx)
                version = await control.policy_version()
            else:
                log.info("no gateway in this run: SFT trains and exports the policy, publishes nothing and does "
                         "not evaluate (give the Trainer an engine to do both)")
            first = 1
            if found is not None:
                ranks.announce("resume", path=str(found.path))  # every rank loads it (sharded: together)
                await asyncio.to_thread(ranks.load_checkpoint, found, policy)
                first = found.step + 1
                result.n_records = list(found.state.get("n_records", []))
                if self._sync is not None:  # under a version never used before (see training.versions)
                    version = await self._sync.resume(found.state, found.step)
                self.console.print(f"[bold]SFT[/]: resumed from {found.path} (iteration {found.step} done, "
                                   f"policy version {version})")
            evaluate = control is not None and bool(ctx.val_dataset)
            if evaluate and cfg.eval_before and found is None:
                result.before = await run.evaluate(lambda: self._evaluate(ctx, "before training"), 0, version)
            for it in run.steps(first - 1, cfg.iterations, None):
                values, version = await self._iteration(ctx, control, policy, update, it, version, run_dir, given)
                await metrics.log(it, values)
                result.history.append(values)
                result.n_records.append(int(values["data/records"]))
                if cfg.checkpoint:
                    await run.save(it, policy, {}, {"policy_version": version, "n_records": result.n_records})
            result.iterations = max(cfg.iterations, first - 1)
            result.policy_version = version
            if evaluate and cfg.eval_after:
                result.after = await run.evaluate(lambda: self._evaluate(ctx, "after training"), result.iterations,
                                                  version)
            result.export_dir = await run.export(policy, cfg.export_dir)
        finally:
            ranks.stop()  # followers stop
            await run.close()
        result.seconds, result.train_seconds = run.seconds, run.training_seconds
        return result

    async def follow(self) -> None:
        """Ranks other than 0 under ``torchrun``: build the same policy, then take part in
        everything rank 0 announces (:mod:`agentbolt.training.ranks`) — every iteration's
        update (every rank runs every batch: sharded, each on its shards; else each on
        its own copy, as rank 0) and, sharded, every read of the policy."""
        from agentbolt.algorithms.sft.update import SFTUpdate
        from agentbolt.training.checkpoint import CheckpointManager

        if self.model is None:
            raise ValueError("SFT under torchrun needs SFT(model=...) on every rank (the weights to start from)")
        policy = self.policy = await asyncio.to_thread(self._make_policy, None, policy_device(None, None))
        update = SFTUpdate(policy, self.config)
        await ranks.follow({
            **ranks.policy_reads(policy), "update": lambda samples, iteration: update.run(samples, iteration=iteration),
            "resume": lambda path: ranks.load_checkpoint(CheckpointManager.load(path), policy),
            "weights": policy.load_trainable_state,
        })

    # ------------------------------------------------------------------ one iteration
    async def _iteration(self, ctx: AlgorithmContext, control: Any, policy: Any, update: Any, it: int,
                         version: int | None, run_dir: Path, given: list[Rollout] | None,
                         ) -> tuple[dict[str, Any], int | None]:
        from agentbolt.adapters.messages import to_jsonl
        from agentbolt.algorithms.sft.chat_data import encode_records

        cfg = self.config
        t0 = time.perf_counter()
        values: dict[str, Any] = {"iteration": it, "policy_version": version}
        if it == 1 and (self.rollouts is not None or self.records is not None):
            records = list(load_records(self.records)) if self.records is not None else []
            if given is not None:
                records += await self._from_rollouts(ctx, given, values, "given")
            source = "the given data"
        else:
            records = await self._from_rollouts(ctx, await self._sample(ctx, control, it), values, "sample")
            source = f"{cfg.samples_per_task} samples per training task"
        records, duplicates = dedupe_records(records)
        to_jsonl(records, run_dir / "records" / f"iteration-{it}.jsonl")
        engine = control.engine if control is not None else None
        parser = cfg.tool_parser or (engine.tool_parser if engine is not None else None)  # rendered as served
        data = await asyncio.to_thread(encode_records, records, policy.tokenizer, max_seq_len=cfg.max_seq_len,
                                       overlong=cfg.overlong, tool_parser=parser)
        values.update({"data/records": len(data.samples), "data/duplicates": duplicates,
                       "data/skipped_overlong": data.skipped_overlong, "data/truncated": data.truncated,
                       "data/no_target": data.no_target, "data/trained_tokens": data.num_trained,
                       "time/data_s": time.perf_counter() - t0})
        if not data.samples:
            why = (f"SFT iteration {it}: nothing to learn from {source} — {values.get('selection', 'no record')}; "
                   f"{data.skipped_overlong} records over max_seq_len={cfg.max_seq_len}, {data.no_target} with no "
                   "assistant message to train")
            values.pop("selection", None)
            if it == 1:
                raise NoTrainingDataError(why + ". Lower min_reward, use top_k_per_task, raise max_seq_len, or give "
                                          "records / a teacher's rollouts")
            log.warning("%s: no update", why)
            return values, version
        values.pop("selection", None)
        t_update = time.perf_counter()
        ranks.announce("update", samples=data.samples, iteration=it)
        with self._progress(it, update.optimizer_steps(len(data.samples))) as on_step:
            stats = await asyncio.to_thread(update.run, data.samples, iteration=it, on_step=on_step)
        values.update(stats.as_metrics())
        values["time/update_s"] = time.perf_counter() - t_update
        if self._sync is not None:
            t_sync = time.perf_counter()
            version, checked = await self._sync.publish(version, it, probe_of(data.samples))
            values.update(checked)
            values["time/sync_s"] = time.perf_counter() - t_sync
        values.update({"policy_version": version, "time/iteration_s": time.perf_counter() - t0})
        self.console.print(f"[bold]SFT[/] iteration {it}/{cfg.iterations}: {len(data.samples)} records, "
                           f"loss {stats.first_epoch_loss:.4f} → {stats.loss:.4f}, policy version {version}")
        return values, version

    async def _given_rollouts(self, ctx: AlgorithmContext) -> list[Rollout] | None:
        """The rollouts of ``rollouts=``, read when the run starts (so ``"store"`` means
        those in the store before this run made any)."""
        if self.rollouts is None:
            return None
        out: list[Rollout] = []
        if self.rollouts == "store":
            cursor = None
            while True:
                page = await ctx.store.query_rollouts(limit=_CHUNK, cursor=cursor)
                out.extend(page.items)
                if page.next_cursor is None:
                    return out
                cursor = page.next_cursor
        ids = [r if isinstance(r, str) else r.rollout_id for r in self.rollouts]
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            out.extend((await ctx.store.query_rollouts(rollout_ids=chunk, limit=len(chunk))).items)
        missing = set(ids) - {r.rollout_id for r in out}
        if missing:
            raise ValueError(f"SFT(rollouts=...): {len(missing)} rollout ids are not in this store "
                             f"(e.g. {sorted(missing)[:3]}); pass the store the rollouts were recorded in")
        return out

    async def _sample(self, ctx: AlgorithmContext, control: Any, it: int) -> list[Rollout]:
        """``samples_per_task`` training-mode rollouts of every training task from the served policy."""
        cfg = self.config
        if control is None:
            raise NoGatewayError(
                f"SFT iteration {it} samples rollouts from the policy, and this run has no gateway: give the trainer "
                "an engine (Trainer(algorithm=SFT(...), gateway=EngineSpec(kind='transformers', path='smollm2'))), "
                "or pass SFT(records=...) / SFT(rollouts=...) with iterations=1"
            )
        if not ctx.train_dataset:
            raise NoTrainingDataError(f"SFT iteration {it} samples rollouts of the training tasks, and there are "
                                      "none: call fit(agent, train_dataset, val_dataset)")
        items = [item for item in ctx.train_dataset for _ in range(cfg.samples_per_task)]
        log.info("iteration %d: sampling %d rollouts (%d per task)", it, len(items), cfg.samples_per_task)
        rollouts = await ctx.run_dataset(items, RolloutMode.TRAIN, timeout=cfg.rollout_timeout,
                                         metadata={"sft_iteration": it})
        await self._failed_steps.check(ctx.store, rollouts, f"iteration {it}")
        await control.flush()  # the gateway's spans of these calls are in the store
        return rollouts

    async def _from_rollouts(self, ctx: AlgorithmContext, rollouts: Sequence[Rollout], values: dict[str, Any],
                             prefix: str) -> list[dict[str, Any]]:
        """Select among ``rollouts`` and make chat records of the kept ones' model calls."""
        from agentbolt.adapters.messages import MessagesAdapter
        from agentbolt.adapters.no_model_call import answered_a_call, left_out

        cfg = self.config
        selection = select_rollouts(rollouts, min_reward=cfg.min_reward, top_k_per_task=cfg.top_k_per_task)
        rewards = [r.reward for r in rollouts if r.reward is not None and r.status == RolloutStatus.SUCCEEDED]
        adapter = MessagesAdapter(cfg.agent_match, train_on_history=cfg.train_on_history)
        records: list[dict[str, Any]] = []
        no_calls = no_model_call = 0
        for r in selection.kept:
            spans = await ctx.store.get_spans(r.rollout_id, r.latest_attempt_id) if r.latest_attempt_id else []
            found = adapter.adapt(spans)
            no_calls += not found
            no_model_call += not found and not answered_a_call(spans)
            records.extend(found)
        if no_model_call:
            log.warning("%s", left_out(f"SFT ({prefix}, selected)", no_model_call, len(selection.kept)))
        values.update({
            f"{prefix}/rollouts": selection.total, f"{prefix}/not_succeeded": selection.not_finished,
            f"{prefix}/unscored": selection.unscored, f"{prefix}/selected": len(selection.kept),
            f"{prefix}/selected_without_calls": no_calls, f"{prefix}/no_model_calls": no_model_call,
            f"{prefix}/reward_mean": statistics.fmean(rewards) if rewards else None,
            f"{prefix}/success_rate": (sum(x >= cfg.success_threshold for x in rewards) / len(rewards)
                                       if rewards else None),
            "selection": selection.describe(),
        })
        log.info("%s: %s, %d chat records", prefix, selection.describe(), len(records))
        return records

    async def _evaluate(self, ctx: AlgorithmContext, when: str) -> EvaluationResult:
        result = await Evaluate("val", threshold=self.config.success_threshold, show=False, console=self.console,
                                progress=self.config.progress, label=f"SFT held-out {when}").run(ctx)
        self.console.print(f"[bold]SFT[/] held-out {when}: {result.headline()}")
        return result

    @contextlib.contextmanager
    def _progress(self, it: int, total: int) -> Iterator[Any]:
        """A bar on a terminal; elsewhere a plain line every 30 s (and at the last step)."""
        with ConsoleProgress(self.console, f"SFT iteration {it}", total, unit="step",
                             enabled=self.config.progress) as bar:

            def advance(step: int, steps: int, loss: float, lr: float) -> None:
                log.debug("iteration %d step %d/%d: loss %.4f lr %.3g", it, step, steps, loss, lr)
                text = f"loss {loss:.4f} · lr {lr:.2e}" if math.isfinite(loss) else ""
                bar.update(step, text, force=step == steps and bar.plain)

            yield advance
