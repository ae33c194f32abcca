"""The ladder's stages — untrained, SFT on the teacher's episodes, GRPO after SFT — on one engine.

Each stage is a function of the run's :class:`Run` (store, the gateway every stage
shares, the harness, tasks, settings) and returns a :class:`Stage`: the held-out success
rate (per kind of task too) and wall time. The gateway is built once, so the SFT LoRA
the engine serves is the policy GRPO starts from. Every held-out evaluation is greedy,
on the same held-out tasks; the teacher never sees them.

With a ``cluster`` section in the settings (``cluster.yaml``), each stage's trainer is
``_common.cluster``'s: the server it starts (store on PostgreSQL, the gateway in front of
the engine servers) and runners started elsewhere; ``cluster.sft`` / ``cluster.grpo``
override the algorithms' config fields. There GRPO starts from ``policy_model``, not from SFT's
LoRA: engine servers apply each LoRA to the model they were started with.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common.cluster import cluster_trainer, overridden
from teacher import MODEL as TEACHER_MODEL
from teacher import serve_teacher

import agentbolt
from agentbolt.algorithms import GRPO, SFT, Evaluate, GRPOConfig, LoraSettings, SFTConfig
from agentbolt.algorithms.evaluate import EvaluationResult
from agentbolt.engines import EngineSpec

__all__ = ["Run", "Stage", "grpo", "grpo_config", "save", "sft", "sft_config", "untrained"]


@dataclass
class Run:
    """What every stage shares."""

    settings: dict[str, Any]
    run_dir: Path
    store: str
    gateway: Any
    harness: Any
    train: list[dict[str, Any]]
    heldout: list[dict[str, Any]]

    @property
    def cluster(self) -> dict[str, Any] | None:
        """The ``cluster`` section of the settings (None: everything in this process)."""
        return self.settings.get("cluster")

    def trainer(self, algorithm: Any, gateway: Any = None) -> agentbolt.Trainer:
        if self.cluster is not None:
            return cluster_trainer(algorithm, self.cluster, self.run_dir, gateway=gateway or self.gateway)
        return agentbolt.Trainer(algorithm=algorithm, n_runners=1,
                                 runner=agentbolt.Runner(concurrency=self.settings["concurrency"]),
                                 store=self.store, gateway=gateway or self.gateway)


@dataclass
class Stage:
    """One rung of the ladder: held-out success, per kind, wall time, details."""

    name: str
    success: float | None
    scored: int
    kinds: dict[str, str]
    wall_s: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _scored(name: str, result: EvaluationResult | None, wall_s: float, **details: Any) -> Stage:
    """A stage from its held-out evaluation: the success rate over scored rollouts, and
    successes per kind of task (``{"constant": "3/5", ...}``)."""
    rows = [r for r in (result.rows if result else ()) if r.scored]
    counts: dict[str, list[int]] = {}
    for r in rows:
        cell = counts.setdefault(str(r.input.get("kind")), [0, 0])
        cell[0] += int((r.reward or 0.0) >= 1.0)
        cell[1] += 1
    success = sum(1 for r in rows if (r.reward or 0.0) >= 1.0) / len(rows) if rows else None
    return Stage(name, success, len(rows), {k: f"{ok}/{n}" for k, (ok, n) in sorted(counts.items())}, wall_s,
                 details)


def untrained(run: Run) -> Stage:
    """SmolLM2 as it is."""
    t0 = time.perf_counter()
    result = run.trainer(Evaluate("val", mode="test", show=False, stop_on_no_success=False, label="untrained")).fit(
        run.harness, None, run.heldout)
    return _scored("untrained", result, time.perf_counter() - t0, **_calls(result))


def _calls(result: EvaluationResult | None) -> dict[str, Any]:
    """How the episodes went: the rollouts that failed (not a zero reward: the harness broke)."""
    return {"rollouts": 0 if result is None else result.n_total, "failed": 0 if result is None else result.n_failed}


def record_teacher(run: Run) -> tuple[list[str], dict[str, Any]]:
    """mini-SWE-agent on every training task against the scripted teacher, through the
    gateway; the ids of its rollouts (SFT's data) and how it went."""
    with serve_teacher(run.train) as url:
        spec = EngineSpec(kind="openai", url=url, model=TEACHER_MODEL)
        algorithm = Evaluate("train", mode="test", show=False, label="teacher")
        recorded = run.trainer(algorithm, gateway=spec).fit(run.harness, run.train)
    rate = "n/a" if recorded.success_rate is None else f"{recorded.success_rate:.0%}"
    print(f"teacher: {recorded.n_total} training tasks recorded, success {rate}")
    return [row.rollout_id for row in recorded.rows], {"teacher_success": recorded.success_rate,
                                                      "teacher_episodes": recorded.n_total}


def sft_config(run: Run) -> SFTConfig:
    """SFT as the settings say (and ``cluster.sft``)."""
    s = run.settings
    config = SFTConfig(min_reward=1.0, epochs=s["sft_epochs"], learning_rate=s["sft_lr"],
                       batch_size=s["sft_batch_size"], lora=LoraSettings(r=s["lora_r"], alpha=2 * s["lora_r"]),
                       micro_batch_tokens=s["micro_batch_tokens"], max_seq_len=4096, warmup_ratio=0.1,
                       gradient_checkpointing=s.get("gradient_checkpointing", False),
                       run_dir=str(run.run_dir / "sft"), seed=s["seed"], eval_before=False, resume=False,
                       progress=s["progress"])
    return config if run.cluster is None else overridden(config, run.cluster, "sft")


def sft(run: Run) -> Stage:
    """SFT of the served model on the teacher's episodes (LoRA); the LoRA stays in the engine."""
    s = run.settings
    t0 = time.perf_counter()
    teacher_ids, teacher = record_teacher(run)
    t_teacher = time.perf_counter() - t0
    config = sft_config(run)
    result = run.trainer(SFT(config, rollouts=teacher_ids, model=s.get("policy_model"))).fit(
        run.harness, run.train, run.heldout)
    train_s = sum(h.get("time/update_s") or 0.0 for h in result.history)
    first = result.history[0] if result.history else {}
    return _scored("SFT", result.after, time.perf_counter() - t0, **teacher, teacher_s=t_teacher, train_s=train_s,
                   records=result.n_records, tokens=first.get("train/tokens"),
                   trained_tokens=first.get("train/trained_tokens"),
                   tokens_per_s=first.get("train/tokens_per_second"),
                   loss=[first.get("train/first_epoch_loss"), first.get("train/loss")], **_calls(result.after))


def grpo_config(run: Run) -> GRPOConfig:
    """GRPO as the settings say (and ``cluster.grpo``)."""
    s = run.settings
    config = GRPOConfig(
        max_steps=s["grpo_steps"], time_budget_s=s["grpo_minutes"] * 60, tasks_per_step=s["tasks_per_step"],
        group_size=s["group_size"], learning_rate=s["grpo_lr"], lora=LoraSettings(r=s["lora_r"], alpha=2 * s["lora_r"]),
        micro_batch_tokens=s["micro_batch_tokens"], gradient_checkpointing=s.get("gradient_checkpointing", False),
        run_dir=str(run.run_dir / "grpo"), seed=s["seed"],
        checkpoint_every=0, eval_before=False, eval_every=0, resume=False, progress=s["progress"],
    )
    return config if run.cluster is None else overridden(config, run.cluster, "grpo")


def grpo(run: Run) -> Stage:
    """GRPO on the training tasks, starting from whatever the engine serves (SFT's LoRA)."""
    s = run.settings
    t0 = time.perf_counter()
    config = grpo_config(run)
    result = run.trainer(GRPO(config, model=s.get("policy_model"))).fit(run.harness, run.train, run.heldout)
    steps = [{"step": i, **{k: h.get(k) for k in STEP_KEYS}} for i, h in enumerate(result.history, start=1)]
    return _scored("SFT+GRPO", result.after, time.perf_counter() - t0, steps=steps, **_calls(result.after))


STEP_KEYS = ("success_rate", "reward/mean", "groups/kept", "merge/rate", "calls/per_rollout", "rollouts/failed",
             "sandbox/events", "time/sample_s", "time/update_s", "time/step_s")
"""What the ladder keeps of each GRPO step."""


def save(stages: list[Stage], path: Path) -> None:
    path.write_text(json.dumps([st.to_json() for st in stages], indent=2))
