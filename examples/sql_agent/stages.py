"""The ladder's stages — untrained, APO, SFT from a teacher, GRPO after SFT — on one engine.

Each stage is a function of the run's :class:`Run` (store, the one gateway every stage
shares, datasets, settings) and returns a :class:`Stage`: execution accuracy on each
held-out split and wall time. The gateway is built once, so the SFT LoRA the engine
serves is the policy GRPO starts from. Every stage but APO uses :data:`INITIAL_PROMPT`;
APO's best prompt is scored on the held-out splits after it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent import sql_agent
from critic import ScriptedCritic
from protocol import INITIAL_PROMPT, MAX_TOKENS
from teacher import MODEL as TEACHER_MODEL
from teacher import serve_teacher

import agentbolt
from agentbolt.algorithms import (
    APO,
    GRPO,
    SFT,
    APOConfig,
    Evaluate,
    GRPOConfig,
    LoraSettings,
    SFTConfig,
)
from agentbolt.algorithms.evaluate import EvaluationResult
from agentbolt.engines import EngineSpec

__all__ = ["Run", "Stage", "apo", "grpo", "sft", "untrained"]

HELDOUT_SPLITS = ("heldout_questions", "heldout_schemas")


@dataclass
class Run:
    """What every stage shares."""

    settings: dict[str, Any]
    run_dir: Path
    store: str
    gateway: Any
    train: list[dict[str, Any]]
    heldout: list[dict[str, Any]]

    def resources(self, prompt: str = INITIAL_PROMPT) -> dict[str, Any]:
        s = self.settings
        return {"llm": agentbolt.gateway_llm(max_tokens=MAX_TOKENS), "prompt_template": agentbolt.PromptTemplate(
            template=prompt), "sql_agent": agentbolt.JsonResource(value={"protocol": s["protocol"],
                                                                           "max_turns": s["max_turns"]})}

    def trainer(self, algorithm: Any, prompt: str = INITIAL_PROMPT, gateway: Any = None) -> agentbolt.Trainer:
        return agentbolt.Trainer(algorithm=algorithm, n_runners=1,
                                 runner=agentbolt.Runner(concurrency=self.settings["concurrency"]),
                                 store=self.store, gateway=gateway or self.gateway, resources=self.resources(prompt))


@dataclass
class Stage:
    """One rung of the ladder: held-out accuracy per split, wall time, details."""

    name: str
    accuracy: dict[str, float | None]
    scored: dict[str, int]
    wall_s: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def per_split(result: EvaluationResult | None) -> tuple[dict[str, float | None], dict[str, int]]:
    """Execution accuracy on each held-out split, over the scored rollouts."""
    accuracy: dict[str, float | None] = {}
    scored: dict[str, int] = {}
    for split in HELDOUT_SPLITS:
        rewards = [r.reward for r in (result.rows if result else ()) if r.scored and r.input.get("split") == split]
        accuracy[split] = sum(1.0 for x in rewards if x is not None and x >= 1.0) / len(rewards) if rewards else None
        scored[split] = len(rewards)
    return accuracy, scored


def per_level(result: EvaluationResult | None) -> dict[str, str]:
    """Successes per held-out split and difficulty level, e.g. ``{"heldout_schemas/join": "3/5"}``."""
    counts: dict[str, list[int]] = {}
    for r in result.rows if result else ():
        if r.scored and r.input.get("split") in HELDOUT_SPLITS:
            cell = counts.setdefault(f"{r.input['split']}/{r.input.get('level')}", [0, 0])
            cell[0] += int((r.reward or 0.0) >= 1.0)
            cell[1] += 1
    return {key: f"{ok}/{n}" for key, (ok, n) in sorted(counts.items())}


def _evaluate(run: Run, prompt: str = INITIAL_PROMPT, label: str = "held-out") -> EvaluationResult:
    algorithm = Evaluate("val", mode="test", show=False, stop_on_no_success=False, label=label)
    return run.trainer(algorithm, prompt).fit(sql_agent, None, run.heldout)


def untrained(run: Run) -> Stage:
    """The model as it is, with the initial prompt."""
    t0 = time.perf_counter()
    result = _evaluate(run, label="untrained")
    accuracy, scored = per_split(result)
    return Stage("untrained", accuracy, scored, time.perf_counter() - t0, {"levels": per_level(result)})


def apo(run: Run) -> Stage:
    """APO on training questions only (its validation set is a slice of the training split),
    with the scripted critic or ``critic_endpoint``; then the best prompt on the held-out splits."""
    s = run.settings
    t0 = time.perf_counter()
    critic: Any = ScriptedCritic()
    if s.get("critic_endpoint"):
        critic = agentbolt.LLM(endpoint=s["critic_endpoint"], model=s["critic_model"], api_key=s.get("critic_api_key"))
    config = APOConfig(beam_width=s["apo_beam"], branch_factor=s["apo_branch"], rounds=s["apo_rounds"],
                       train_batch_size=s["apo_train_batch"], val_batch_size=None, run_dir=str(run.run_dir / "apo"),
                       resume=False, seed=s["seed"], progress=s["progress"], max_failures_shown=2,
                       max_trace_chars=1500, max_failed_steps=0)
    n_val = s["apo_val_size"]
    apo_train, apo_val = run.train[n_val:], run.train[:n_val]
    result = run.trainer(APO(config, initial_prompt=INITIAL_PROMPT, critic=critic)).fit(sql_agent, apo_train, apo_val)
    best = result.best.template
    t_search = time.perf_counter() - t0
    evaluation = _evaluate(run, best, label="APO best prompt")
    accuracy, scored = per_split(evaluation)
    (run.run_dir / "apo_best_prompt.txt").write_text(best)
    val = {"initial": None if result.before is None else result.before.success_rate,
           "best": None if result.after is None else result.after.success_rate}
    return Stage("APO", accuracy, scored, time.perf_counter() - t0,
                 {"best_prompt": best, "search_s": t_search, "apo_validation": val,
                  "candidates": len(result.candidates), "levels": per_level(evaluation)})


def record_teacher(run: Run) -> list[str]:
    """The agent on every training question against the scripted teacher, through the
    gateway; the ids of its rollouts (SFT's data)."""
    with serve_teacher(run.train) as url:
        spec = EngineSpec(kind="openai", url=url, model=TEACHER_MODEL)
        algorithm = Evaluate("train", mode="test", show=False, label="teacher")
        recorded = run.trainer(algorithm, gateway=spec).fit(sql_agent, run.train)
    rate = "n/a" if recorded.success_rate is None else f"{recorded.success_rate:.0%}"
    print(f"teacher: {recorded.n_total} training questions recorded, success {rate}")
    return [row.rollout_id for row in recorded.rows]


def sft(run: Run) -> Stage:
    """SFT of the served model on the teacher's traces; the LoRA stays in the engine."""
    s = run.settings
    t0 = time.perf_counter()
    teacher_ids = record_teacher(run)
    t_teacher = time.perf_counter() - t0
    config = SFTConfig(min_reward=1.0, epochs=s["sft_epochs"], learning_rate=s["sft_lr"],
                       batch_size=s["sft_batch_size"], lora=LoraSettings(r=s["lora_r"], alpha=2 * s["lora_r"]),
                       micro_batch_tokens=4096, warmup_ratio=0.1, run_dir=str(run.run_dir / "sft"), seed=s["seed"],
                       eval_before=False, resume=False, progress=s["progress"])
    result = run.trainer(SFT(config, rollouts=teacher_ids, model=s.get("policy_model"))).fit(
        sql_agent, run.train, run.heldout)
    accuracy, scored = per_split(result.after)
    train_s = sum(h.get("time/update_s") or 0.0 for h in result.history)
    return Stage("SFT", accuracy, scored, time.perf_counter() - t0,
                 {"teacher_rollouts": len(teacher_ids), "records": result.n_records, "teacher_s": t_teacher,
                  "train_s": train_s, "levels": per_level(result.after)})


def grpo(run: Run) -> Stage:
    """GRPO on the training questions, starting from whatever the engine serves (SFT's LoRA)."""
    s = run.settings
    t0 = time.perf_counter()
    config = GRPOConfig(
        max_steps=s["grpo_steps"], time_budget_s=s["grpo_minutes"] * 60, tasks_per_step=s["tasks_per_step"],
        group_size=s["group_size"], learning_rate=s["grpo_lr"], lora=LoraSettings(r=s["lora_r"], alpha=2 * s["lora_r"]),
        micro_batch_tokens=2048, run_dir=str(run.run_dir / "grpo"), seed=s["seed"], checkpoint_every=0,
        eval_before=False, eval_every=0, resume=False, progress=s["progress"],
    )
    result = run.trainer(GRPO(config, model=s.get("policy_model"))).fit(sql_agent, run.train, run.heldout)
    accuracy, scored = per_split(result.after)
    steps = [{"step": i, **{k: h.get(k) for k in ("time/step_s", "time/sample_s", "time/update_s", "success_rate",
                                                   "reward/mean", "groups/kept", "merge/rate")}}
             for i, h in enumerate(result.history, start=1)]
    return Stage("SFT+GRPO", accuracy, scored, time.perf_counter() - t0,
                 {"steps": steps, "levels": per_level(result.after)})


def save(stages: list[Stage], path: Path) -> None:
    path.write_text(json.dumps([st.to_json() for st in stages], indent=2))
