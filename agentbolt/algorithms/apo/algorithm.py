"""``APO``: automatic prompt optimisation with textual gradients and beam search.

The prompt template is a versioned resource; APO searches over its text. In the order
the code runs it (:meth:`APO.run`, :meth:`APO._round`):

0. **start** — the initial template is published as a resources version and scored on
   a fixed validation subset (the same items for every candidate, so scores compare);
1. **failures** — each parent in the beam runs a training batch (sampled with a seeded
   RNG); its rollouts below ``failure_threshold`` are its failures;
2. **gradient** — ``branch_factor`` times per parent: the critic reads some failing
   traces (model calls + reward) and says what went wrong and what to change; the
   editor applies that critique and returns a new template, which must keep the
   parent's ``{placeholders}`` (else it is rejected, retried, then dropped);
3. **validate** — each new template is published (its rollouts pinned to that
   version) and scored on the validation subset; failed rollouts are left out, not 0;
4. **select** — the beam becomes the best ``beam_width`` of beam ∪ new (by mean, or
   the GEPA-style Pareto rule, :mod:`.selection`).

Every candidate (parent, critique, scores) goes to ``apo_history.jsonl`` as soon as it
is scored; ``apo_state.json`` marks completed rounds, so a rerun resumes after the last.
At the end the best template (highest mean validation reward) is published as the
latest version and written to ``best_prompt.txt``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from agentbolt.algorithms.apo.candidates import (
    HISTORY_FILE,
    STATE_FILE,
    APOState,
    Candidate,
    append_history,
    load_history,
    rng_state_from_json,
    rng_state_to_json,
    write_history,
)
from agentbolt.algorithms.apo.config import APOConfig
from agentbolt.algorithms.apo.critic_models import chat_model_for, check_model_spec
from agentbolt.algorithms.apo.critic_traces import rollout_trace
from agentbolt.algorithms.apo.display import round_progress, round_table
from agentbolt.algorithms.apo.placeholders import check_formats
from agentbolt.algorithms.apo.result import APOError, APOResult, RoundRecord
from agentbolt.algorithms.apo.rollout_scores import (
    evaluation_result,
    mean_or_none,
    scored_reward,
)
from agentbolt.algorithms.apo.run_state import APORun
from agentbolt.algorithms.apo.selection import best_of, select
from agentbolt.algorithms.apo.textual_gradient import (
    ChatModel,
    EditOutcome,
    TextualGradient,
)
from agentbolt.algorithms.base import Algorithm, AlgorithmContext
from agentbolt.algorithms.evaluate import EvaluationResult
from agentbolt.algorithms.failures import FailedStepsWatch, check_evaluation
from agentbolt.algorithms.gateway_access import ensure_gateway_llm
from agentbolt.types import LLM, PromptTemplate, Rollout, RolloutMode

__all__ = ["APO", "APOError", "APOResult", "RoundRecord"]

log = logging.getLogger("agentbolt.algorithms.apo")

EVAL_SAMPLING: dict[str, dict[str, float]] = {"val": {"temperature": 0.0}, "test": {"temperature": 0.0}}
"""Sampling APO wants the gateway to force on validation calls, so scores compare."""


class APO(Algorithm):
    """Automatic prompt optimisation: a critic's textual gradients, an editor, beam search.

    ``initial_prompt``: the template to start from (``str`` or :class:`PromptTemplate`);
    default: the latest published resource named ``config.prompt_name``.
    ``critic``: an OpenAI-compatible endpoint (:class:`~agentbolt.LLM`), ``"gateway"``
    for the run's own engine, or any object with ``async chat(messages, temperature=,
    max_tokens=) -> str``. ``editor``: the same kinds; None: the critic.
    """

    def __init__(self, config: APOConfig | None = None, *, initial_prompt: str | PromptTemplate | None = None,
                 critic: LLM | str | ChatModel, editor: LLM | str | ChatModel | None = None,
                 console: Console | None = None, **overrides: Any) -> None:
        base = config or APOConfig()
        self.config = APOConfig.model_validate({**base.model_dump(), **overrides}) if overrides else base
        if isinstance(initial_prompt, PromptTemplate):
            initial_prompt = initial_prompt.template
        if initial_prompt is not None:
            if not isinstance(initial_prompt, str) or not initial_prompt.strip():
                raise APOError(f"initial_prompt must be a non-empty template string, got {initial_prompt!r}")
            check_formats(initial_prompt)
        self.initial_prompt = initial_prompt
        self.critic = check_model_spec(critic, "critic")
        self.editor = check_model_spec(editor, "editor") if editor is not None else None
        self.console = console or Console(stderr=True)
        self._failed_steps = FailedStepsWatch(self.config.max_failed_steps, "APO")
        self.best_prompt: PromptTemplate | None = None
        self.result: APOResult | None = None

    # ------------------------------------------------------------------ setup
    def configure_gateway(self, config: Any) -> None:
        """Validation and test calls are greedy unless the gateway config says otherwise,
        so that candidates are compared on the same footing."""
        for mode, forced in EVAL_SAMPLING.items():
            if config.sampling.get(mode) is None:
                config.sampling[mode] = dict(forced)

    async def _ensure_llm(self, ctx: AlgorithmContext) -> None:
        """With a gateway and no LLM resource, publish ``llm = gateway_llm()`` so agents reach the engine."""
        from agentbolt.store.http import HttpStore

        if ctx.gateway is not None or isinstance(ctx.store, HttpStore):
            await ensure_gateway_llm(ctx)

    async def _initial_template(self, ctx: AlgorithmContext) -> str:
        if self.initial_prompt is not None:
            return self.initial_prompt
        name = self.config.prompt_name
        latest = await ctx.store.get_latest_resources()
        found = latest.resources.get(name) if latest is not None else None
        if not isinstance(found, PromptTemplate):
            raise APOError(
                f"APO has no prompt to start from: no PromptTemplate resource named {name!r} is published. Pass "
                f"APO(initial_prompt='...') or Trainer(resources={{{name!r}: agentbolt.PromptTemplate(template=...)}})"
            )
        check_formats(found.template)
        return found.template

    # ------------------------------------------------------------------ run
    async def run(self, ctx: AlgorithmContext) -> APOResult:
        from agentbolt.metrics import MetricsLogger

        cfg = self.config
        t_start = time.perf_counter()
        train, val = list(ctx.train_dataset or []), list(ctx.val_dataset or [])
        if not val:
            raise APOError("APO chooses prompts by validation reward and got no validation set: "
                           "call trainer.fit(agent, train_dataset, val_dataset)")
        if not train and cfg.rounds > 0:
            raise APOError("APO finds what to fix in training rollouts and got no training set: "
                           "call trainer.fit(agent, train_dataset, val_dataset)")
        run_dir = Path(cfg.run_dir or f"runs/apo-{time.strftime('%Y%m%d-%H%M%S')}")
        run_dir.mkdir(parents=True, exist_ok=True)
        run_id = cfg.run_name or run_dir.name
        critic, own_critic = chat_model_for(self.critic, ctx, "critic", self.config)
        editor, own_editor = (
            (critic, False) if self.editor is None else chat_model_for(self.editor, ctx, "editor", self.config)
        )
        gradient = TextualGradient(critic, editor, critic_temperature=cfg.critic_temperature,
                                   editor_temperature=cfg.editor_temperature, max_tokens=cfg.max_tokens,
                                   max_edit_retries=cfg.max_edit_retries, failure_threshold=cfg.failure_threshold)
        metrics = MetricsLogger.from_names(cfg.loggers, run_dir=run_dir, store=ctx.store, run_id=run_id,
                                           config=cfg.model_dump(mode="json"))
        run = APORun(ctx=ctx, run_dir=run_dir, train=train, val=val)
        result: APOResult | None = None
        try:
            await self._ensure_llm(ctx)
            initial = await self._initial_template(ctx)
            state = APOState.load(run_dir) if cfg.resume else None
            if state is not None:
                await self._resume(run, state, initial)
            else:
                await self._start(run, initial)
                await metrics.log(0, run.round_metrics(0, [], 0, 0, 0))
            with round_progress(self.console, cfg.rounds, run.completed, cfg.progress) as advance:
                for r in range(run.completed + 1, cfg.rounds + 1):
                    record = await self._round(run, gradient, r)
                    await metrics.log(r, record.metrics)
                    advance(record)
            result = await self._finish(run, metrics)
        finally:
            await metrics.close()
            for model, own in ((critic, own_critic), (editor, own_editor)):
                if own:
                    await model.aclose()
        result.seconds = time.perf_counter() - t_start
        self.result = result
        return result

    async def _start(self, run: APORun, initial: str) -> None:
        """Round 0: publish and score the initial template (a fresh run)."""
        cfg = self.config
        for stale in (run.run_dir / HISTORY_FILE, run.run_dir / STATE_FILE):
            stale.unlink(missing_ok=True)
        n_val = len(run.val)
        if cfg.val_batch_size is None or cfg.val_batch_size >= n_val:
            run.val_indices = list(range(n_val))
        else:
            run.val_indices = sorted(random.Random(f"apo-val-{cfg.seed}").sample(range(n_val), cfg.val_batch_size))
        run.rng = random.Random(cfg.seed)
        root = run.new_candidate(initial, parent=None, round_=0, critique=None)
        await self._publish(run, root)
        await self._score(run, [root])
        run.beam = [root]
        if cfg.eval_before:
            cached = run.rollouts.get(root.candidate_id) if run.val_indices == list(range(n_val)) else None
            run.before = await self._evaluate(run, root, "the initial prompt", cached)
        self._save_state(run, 0)
        self._show(run, 0, [root], 0)

    async def _resume(self, run: APORun, state: APOState, initial: str) -> None:
        """Reload the candidates of the completed rounds and the beam; publish again the
        parents the store does not hold (a fresh store)."""
        found = load_history(run.run_dir)
        kept = [c for c in found if c.round <= state.completed_round]
        if len(kept) < len(found):
            log.warning("dropping %d candidate(s) of the unfinished round %d (it is run again)",
                        len(found) - len(kept), state.completed_round + 1)
            write_history(run.run_dir, kept)
        by_id = {c.candidate_id: c for c in kept}
        missing = [cid for cid in state.beam if cid not in by_id]
        if missing:
            raise APOError(f"{run.run_dir / STATE_FILE} names candidates {missing} that {HISTORY_FILE} lacks: "
                           "the run directory is inconsistent; start over with resume=False or another run_dir")
        if any(i >= len(run.val) for i in state.val_indices):
            raise APOError(f"{run.run_dir} was scored on a larger validation set ({max(state.val_indices) + 1}+ items) "
                           f"than the {len(run.val)} given now: pass the same datasets, or resume=False")
        run.candidates = kept
        run.val_indices = state.val_indices
        run.rng = random.Random()
        run.rng.setstate(rng_state_from_json(state.rng_state))
        run.beam = [by_id[cid] for cid in state.beam]
        run.completed = state.completed_round
        root = next((c for c in kept if c.parent_id is None), None)
        if root is not None and root.template != initial:
            log.warning("%s started from another prompt than the one given now; resuming it "
                        "(resume=False or another run_dir starts over)", run.run_dir)
        for c in run.beam:
            if not await self._still_published(run, c):
                await self._publish(run, c)
        self.console.print(f"[bold]APO[/]: resumed {run.run_dir} after round {state.completed_round} "
                           f"({len(kept)} candidates, beam {', '.join(state.beam)})")

    async def _still_published(self, run: APORun, c: Candidate) -> bool:
        if c.resources_version is None:
            return False
        from agentbolt.store.errors import NotFoundError

        try:
            resources = await run.ctx.store.get_resources(c.resources_version)
        except NotFoundError:
            return False
        found = resources.resources.get(self.config.prompt_name)
        return isinstance(found, PromptTemplate) and found.template == c.template

    # ------------------------------------------------------------------ one round
    async def _round(self, run: APORun, gradient: TextualGradient, r: int) -> RoundRecord:
        cfg = self.config
        ctx = run.ctx
        # 1. each parent's training batch, all enqueued at once
        batches = []
        for parent in run.beam:
            indices = run.rng.sample(range(len(run.train)), min(cfg.train_batch_size, len(run.train)))
            handles = await ctx.enqueue([run.train[i] for i in indices], RolloutMode.TRAIN,
                                        resources_version=parent.resources_version,
                                        metadata={"apo": {"candidate_id": parent.candidate_id, "round": r}})
            batches.append((parent, indices, handles))
        jobs: list[tuple[Candidate, list[str]]] = []
        train_rewards: list[float] = []
        idle_parents = 0
        waited = [(parent, indices, await self._wait(run, handles)) for parent, indices, handles in batches]
        await self._failed_steps.check(ctx.store, [x for _, _, done in waited for x in done], f"round {r}")
        for parent, indices, done in waited:
            failures: list[tuple[float, int, Rollout]] = []
            for pos, (i, rollout) in enumerate(zip(indices, done, strict=True)):
                reward = scored_reward(rollout)
                if reward is not None:
                    parent.train_scores[i] = float(reward)
                    train_rewards.append(float(reward))
                    if reward < cfg.failure_threshold:
                        failures.append((float(reward), pos, rollout))
            append_history(run.run_dir, parent)
            if not failures:
                idle_parents += 1
                log.info("round %d: %s had no failure in its training batch (%d rollouts): no children",
                         r, parent.candidate_id, len(done))
                continue
            failures.sort(key=lambda f: (f[0], f[1]))  # worst first
            for _ in range(cfg.branch_factor):
                shown = failures if len(failures) <= cfg.max_failures_shown else \
                    sorted(run.rng.sample(failures, cfg.max_failures_shown), key=lambda f: (f[0], f[1]))
                traces = [await self._trace(run, n, rollout) for n, (_, _, rollout) in enumerate(shown, 1)]
                jobs.append((parent, traces))
        # 2. critic → editor, several conversations at once
        limit = asyncio.Semaphore(cfg.llm_concurrency)

        async def one(parent: Candidate, traces: list[str]) -> EditOutcome:
            async with limit:
                return await gradient.step(parent.template, traces)

        outcomes = await asyncio.gather(*(one(p, t) for p, t in jobs))
        # 3. new candidates, in a fixed order
        new: list[Candidate] = []
        rejected = dropped = duplicates = 0
        known = {c.template for c in run.candidates}
        for (parent, _), outcome in zip(jobs, outcomes, strict=True):
            rejected += len(outcome.rejected)
            if outcome.template is None:
                dropped += 1
                log.warning("round %d: an edit of %s was dropped: every editor reply broke the placeholders (%s)",
                            r, parent.candidate_id, "; ".join(outcome.rejected))
                continue
            if outcome.template in known:
                duplicates += 1
                log.info("round %d: an edit of %s repeats a known template: not scored again", r, parent.candidate_id)
                continue
            known.add(outcome.template)
            child = run.new_candidate(outcome.template, parent=parent, round_=r, critique=outcome.critique)
            await self._publish(run, child)
            new.append(child)
        # 4. validate, 5. select
        await self._score(run, new)
        run.beam = select([*run.beam, *new], cfg.beam_width, cfg.selection)
        self._save_state(run, r)
        values = run.round_metrics(r, new, rejected, dropped, idle_parents)
        values.update({"n_duplicate_edits": duplicates, "train/mean_reward": mean_or_none(train_rewards)})
        self._show(run, r, new, rejected)
        record = RoundRecord(round=r, beam=[c.candidate_id for c in run.beam], new=[c.candidate_id for c in new],
                             metrics=values)
        run.records.append(record)
        return record

    # ------------------------------------------------------------------ store work
    async def _publish(self, run: APORun, c: Candidate, **extra: Any) -> int:
        """Publish ``c`` as a new resources version (other resources unchanged)."""
        meta = {"apo": {"candidate_id": c.candidate_id, "parent_id": c.parent_id, "round": c.round,
                        "critique": c.critique, **extra}}
        resources = await run.ctx.store.update_resources(
            {self.config.prompt_name: PromptTemplate(template=c.template)}, metadata=meta)
        c.resources_version = resources.version
        return resources.version

    async def _wait(self, run: APORun, handles: Sequence[Rollout]) -> list[Rollout]:
        """Wait for rollouts; those still unfinished after ``rollout_timeout`` are cancelled."""
        done = await run.ctx.wait(handles, timeout=self.config.rollout_timeout)
        for r in done:
            if not r.status.is_terminal:
                with contextlib.suppress(Exception):  # finished meanwhile, or the store is going away
                    await run.ctx.store.cancel_rollout(r.rollout_id)
        return done

    async def _score(self, run: APORun, candidates: Sequence[Candidate]) -> None:
        """Run the validation subset with each candidate (all enqueued at once) and record
        the scores; failed or unfinished rollouts are counted, not scored."""
        items = [run.val[i] for i in run.val_indices]
        pending = []
        for c in candidates:
            handles = await run.ctx.enqueue(items, RolloutMode.VAL, resources_version=c.resources_version,
                                            metadata={"apo": {"candidate_id": c.candidate_id, "round": c.round}})
            pending.append((c, handles))
        waited = [(c, await self._wait(run, handles)) for c, handles in pending]
        await check_evaluation(run.ctx.store, [r for _, done in waited for r in done],
                               f"APO validation of {len(waited)} candidate(s)")
        for c, done in waited:
            run.rollouts[c.candidate_id] = done
            c.val_scores = {i: float(reward) for i, r in zip(run.val_indices, done, strict=True)
                            if (reward := scored_reward(r)) is not None}
            c.n_failed = len(done) - len(c.val_scores)
            if c.n_failed:
                log.warning("%s: %d of %d validation rollouts failed; they are left out of its score, not counted "
                            "as 0", c.candidate_id, c.n_failed, len(done))
            append_history(run.run_dir, c)

    async def _trace(self, run: APORun, n: int, rollout: Rollout) -> str:
        """The rollout as the critic reads it (its model calls read from its spans)."""
        return await rollout_trace(run.ctx, n, rollout, self.config.max_trace_chars)

    async def _evaluate(self, run: APORun, c: Candidate, what: str, cached: list[Rollout] | None) -> EvaluationResult:
        """``c`` on the whole validation set (reusing its subset's rollouts when that is the whole set)."""
        rollouts = cached
        if rollouts is None:
            handles = await run.ctx.enqueue(run.val, RolloutMode.VAL, resources_version=c.resources_version,
                                            metadata={"apo": {"candidate_id": c.candidate_id, "eval": True}})
            rollouts = await self._wait(run, handles)
        await check_evaluation(run.ctx.store, rollouts, f"APO validation, {what}")
        result = await evaluation_result(run.ctx, rollouts, self.config.success_threshold)
        mean = "n/a" if result.mean_reward is None else f"{result.mean_reward:.3f}"
        rate = "n/a" if result.success_rate is None else f"{result.success_rate:.1%}"
        self.console.print(f"[bold]APO[/] validation, {what}: mean reward {mean}, success {rate} "
                           f"({result.n_scored}/{result.n_total} scored)")
        return result

    def _save_state(self, run: APORun, completed: int) -> None:
        run.completed = completed
        APOState(completed_round=completed, beam=[c.candidate_id for c in run.beam], val_indices=run.val_indices,
                 rng_state=rng_state_to_json(run.rng.getstate())).save(run.run_dir)

    async def _finish(self, run: APORun, metrics: Any) -> APOResult:
        """Publish the best template as the latest version, score it, write it out."""
        import json

        cfg = self.config
        best = best_of(run.candidates)
        version = await self._publish(run, best, best=True, mean_val=best.mean_val)
        after = None
        if cfg.eval_after:
            cached = run.rollouts.get(best.candidate_id) if run.val_indices == list(range(len(run.val))) else None
            after = await self._evaluate(run, best, "the best prompt", cached)
            await metrics.log(run.completed, {"after/mean_reward": after.mean_reward,
                                              "after/success_rate": after.success_rate})
        prompt_file = run.run_dir / "best_prompt.txt"
        prompt_file.write_text(best.template, encoding="utf-8")
        summary = {"candidate_id": best.candidate_id, "template": best.template, "parent_id": best.parent_id,
                   "round": best.round, "critique": best.critique, "mean_val": best.mean_val,
                   "val_scores": best.val_scores, "n_failed": best.n_failed, "resources_version": version,
                   "before_mean_reward": run.before.mean_reward if run.before else None,
                   "after_mean_reward": after.mean_reward if after else None}
        (run.run_dir / "best_prompt.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
        self.best_prompt = PromptTemplate(template=best.template)
        mean = "n/a" if best.mean_val is None else f"{best.mean_val:.3f}"
        self.console.print(f"[bold]APO[/]: best prompt {best.candidate_id} (round {best.round}, mean validation "
                           f"reward {mean}) saved to {prompt_file}")
        return APOResult(best=best, candidates=list(run.candidates), rounds=run.completed, run_dir=run.run_dir,
                         prompt_file=prompt_file, before=run.before, after=after, history=run.records)

    # ------------------------------------------------------------------ display
    def _show(self, run: APORun, r: int, new: Sequence[Candidate], rejected: int) -> None:
        if self.config.progress:
            self.console.print(round_table(r, run.beam, new))
        best = best_of(run.candidates)
        log.info("round %d: %d new candidate(s), %d rejected edit(s); best %s (mean val %s); beam %s", r, len(new),
                 rejected, best.candidate_id, best.mean_val, ", ".join(c.candidate_id for c in run.beam))
