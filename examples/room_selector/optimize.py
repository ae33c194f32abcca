"""Optimise the room-selector prompt with APO (automatic prompt optimisation).

    # your OpenAI-compatible endpoint plays agent, critic and editor
    python examples/room_selector/optimize.py --endpoint https://api.openai.com/v1 --model gpt-4o-mini \\
        --api-key $OPENAI_API_KEY
    # a different (stronger) critic and editor
    python examples/room_selector/optimize.py --endpoint http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-1.5B-Instruct \\
        --critic-endpoint https://api.openai.com/v1 --critic-model gpt-4o --critic-api-key $OPENAI_API_KEY
    # no endpoint: everything on this machine's SmolLM2-135M (transformers engine, CPU)
    python examples/room_selector/optimize.py --smoke        # the whole path in a minute or two
    python examples/room_selector/optimize.py                # a longer local run

The agent (``agent.py``) picks a meeting room from constraints (``task.py``), graded
exactly. APO runs it with the initial prompt, shows the failures to the critic, lets the
editor rewrite the prompt, keeps the best candidates by validation accuracy, and writes
``best_prompt.txt`` and ``apo_history.jsonl`` (every candidate, its parent, critique and
scores) to ``--run-dir`` (default ``runs/room_selector``), next to the embedded SQLite
store ``store.db``. A second run with the same ``--run-dir`` resumes after the last
completed round; ``--fresh`` starts over. ``--test-size N`` also scores the initial and the
best prompt on N held-out problems that APO never saw.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from agent import INITIAL_PROMPT, MAX_TOKENS, room_agent
from task import make_dataset

import agentbolt
from agentbolt.algorithms import APO, Algorithm, AlgorithmContext, APOConfig, APOResult
from agentbolt.types import RolloutMode, RolloutStatus


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_argument_group("models (without --endpoint: the local SmolLM2 engine plays every part)")
    where.add_argument("--endpoint", help="base URL of an OpenAI-compatible API (with /v1) for agent, critic, editor")
    where.add_argument("--model", help="model name at --endpoint")
    where.add_argument("--api-key", help="bearer key of --endpoint")
    where.add_argument("--critic-endpoint", help="another endpoint for critic and editor (default: --endpoint)")
    where.add_argument("--critic-model", help="model of critic and editor (default: --model)")
    where.add_argument("--critic-api-key", help="key of --critic-endpoint (default: --api-key)")
    where.add_argument("--threads", type=int, default=1,
                       help="torch threads of the local engine (1 avoids thread-pool stalls on a busy CPU)")
    where.add_argument("--device", default="cpu", help="device of the local engine (cpu, cuda)")
    search = p.add_argument_group("search")
    search.add_argument("--smoke", action="store_true", help="tiny budget: 1 round, beam 1, branch 1, 4 problems")
    search.add_argument("--rounds", type=int, default=3)
    search.add_argument("--beam", type=int, default=2, help="beam width")
    search.add_argument("--branch", type=int, default=2, help="new candidates per parent per round")
    search.add_argument("--selection", choices=["beam", "pareto"], default="beam")
    search.add_argument("--train-size", type=int, default=40)
    search.add_argument("--val-size", type=int, default=24)
    search.add_argument("--train-batch", type=int, default=8, help="training rollouts per parent per round")
    search.add_argument("--test-size", type=int, default=0, help="held-out problems to score the initial and best prompt on")
    search.add_argument("--max-tokens", type=int, help=f"agent's max_tokens (default {MAX_TOKENS}; 64 locally)")
    search.add_argument("--critic-max-tokens", type=int, help="critic/editor max_tokens (default: none sent; 160 locally)")
    search.add_argument("--concurrency", type=int, default=8, help="rollouts at once")
    p.add_argument("--run-dir", default="runs/room_selector")
    p.add_argument("--fresh", action="store_true", help="delete --run-dir first instead of resuming")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress display")
    args = p.parse_args(argv)
    if args.endpoint and not args.model:
        p.error("--endpoint needs --model (the model name the endpoint serves)")
    if (args.critic_endpoint or args.critic_model) and not args.endpoint:
        p.error("--critic-endpoint/--critic-model go with --endpoint; without it the local engine plays every part")
    if args.smoke:
        args.rounds, args.beam, args.branch = 1, 1, 1
        args.train_size, args.val_size, args.train_batch = 4, 4, 4
        args.test_size = min(args.test_size, 4)
    local = not args.endpoint
    if args.max_tokens is None:
        args.max_tokens = 64 if local else MAX_TOKENS
    if args.critic_max_tokens is None and local:
        args.critic_max_tokens = 160
    return args


# ----------------------------------------------------------------------------- wiring
def models(args: argparse.Namespace) -> tuple[agentbolt.LLM, agentbolt.LLM | str, Any]:
    """``(agent's llm, critic, gateway)``: the endpoint's, or the local engine's."""
    if args.endpoint:
        llm = agentbolt.LLM(endpoint=args.endpoint, model=args.model, api_key=args.api_key,
                            sampling_parameters={"max_tokens": args.max_tokens, "temperature": 0.0})
        critic = agentbolt.LLM(endpoint=args.critic_endpoint or args.endpoint, model=args.critic_model or args.model,
                               api_key=args.critic_api_key or args.api_key)
        return llm, critic, None
    from agentbolt.engines import EngineSpec

    engine = EngineSpec(kind="transformers", path="smollm2", num_threads=args.threads, device=args.device,
                        max_batch_size=args.concurrency, max_tokens=max(args.max_tokens, args.critic_max_tokens or 0))
    return agentbolt.gateway_llm(max_tokens=args.max_tokens, temperature=0.0), "gateway", engine


class ScorePrompts(Algorithm):
    """Score each of ``templates`` on the trainer's validation set (greedy); returns
    ``{name: accuracy}``. Used for the held-out test split, after APO."""

    def __init__(self, templates: dict[str, str], prompt_name: str = "prompt_template") -> None:
        self.templates = templates
        self.prompt_name = prompt_name

    async def run(self, ctx: AlgorithmContext) -> dict[str, float | None]:
        by_text: dict[str, float | None] = {}  # APO may keep the initial prompt: score it once
        for template in dict.fromkeys(self.templates.values()):  # each published over the latest resources
            published = await ctx.store.update_resources({self.prompt_name: agentbolt.PromptTemplate(template=template)})
            rollouts = await ctx.run_dataset(ctx.val_dataset or [], RolloutMode.TEST,
                                             resources_version=published.version)
            rewards = [r.reward for r in rollouts if r.status == RolloutStatus.SUCCEEDED and r.reward is not None]
            by_text[template] = sum(rewards) / len(rewards) if rewards else None
        return {name: by_text[template] for name, template in self.templates.items()}


def trainer(algorithm: Algorithm, args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    llm, _, gateway = models(args)
    return agentbolt.Trainer(
        algorithm=algorithm, n_runners=1, runner=agentbolt.Runner(concurrency=args.concurrency),
        store=f"sqlite:///{run_dir / 'store.db'}", resources={"llm": llm}, gateway=gateway,
    )


# ----------------------------------------------------------------------------- main
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _accuracy(evaluation: Any, candidate: Any) -> float | None:
    """Accuracy on the validation set: APO's evaluation of this process, else (a resumed
    run, evaluated earlier) the candidate's recorded scores — the whole set, since
    ``val_batch_size`` is None."""
    if evaluation is not None:
        return evaluation.success_rate
    return None if candidate is None else candidate.mean_val


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    if args.fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    _, critic, gateway = models(args)
    local = gateway is not None  # a 135M critic on a CPU: fewer, shorter traces and one editor retry
    config = APOConfig(
        beam_width=args.beam, branch_factor=args.branch, rounds=args.rounds, selection=args.selection,
        train_batch_size=args.train_batch, val_batch_size=None, max_tokens=args.critic_max_tokens,
        llm_concurrency=args.concurrency, run_dir=str(run_dir), resume=True, seed=args.seed,
        progress=not args.quiet, max_failures_shown=2 if local else 4, max_trace_chars=1500 if local else 4000,
        max_edit_retries=1 if local else 2,
    )
    apo = APO(config, initial_prompt=INITIAL_PROMPT, critic=critic)
    train, val = make_dataset("train", args.train_size), make_dataset("val", args.val_size)
    result: APOResult = trainer(apo, args, run_dir).fit(room_agent, train, val)
    best = result.best
    edits = _edit_counts(result)
    out: dict[str, Any] = {
        "val_before": _accuracy(result.before, next((c for c in result.candidates if c.parent_id is None), None)),
        "val_after": _accuracy(result.after, best),
        "initial_prompt": INITIAL_PROMPT, "best_prompt": best.template, "best_id": best.candidate_id,
        "best_round": best.round, "n_candidates": len(result.candidates), "prompt_file": str(result.prompt_file),
        "history_file": str(run_dir / "apo_history.jsonl"), **edits,
    }
    if args.test_size:
        test = make_dataset("test", args.test_size)
        scores = trainer(ScorePrompts({"initial": INITIAL_PROMPT, "best": best.template}), args, run_dir).fit(
            room_agent, None, test)
        out["test_before"], out["test_after"] = scores["initial"], scores["best"]
    out["wall_minutes"] = (time.perf_counter() - t0) / 60

    print()
    print("initial prompt:\n" + _indent(INITIAL_PROMPT))
    print(f"best prompt ({best.candidate_id}, round {best.round}):\n" + _indent(best.template))
    print(f"validation accuracy ({args.val_size} problems, greedy): {_pct(out['val_before'])} initial -> "
          f"{_pct(out['val_after'])} best")
    if args.test_size:
        print(f"held-out test accuracy ({args.test_size} problems APO never saw): {_pct(out['test_before'])} initial "
              f"-> {_pct(out['test_after'])} best")
    print(f"editor replies: {out['edits_accepted']} accepted, {out['edits_rejected']} rejected for broken "
          f"placeholders ({out['edits_dropped']} edits given up)")
    print(f"{out['n_candidates']} candidates in {out['wall_minutes']:.1f} min; best prompt: {out['prompt_file']}; "
          f"history: {out['history_file']}")
    (run_dir / "summary.json").write_text(json.dumps(out, indent=2))
    return out


def _edit_counts(result: APOResult) -> dict[str, int]:
    """What the editor did in this process's rounds: replies accepted as new candidates,
    replies rejected for broken placeholders, edits dropped (every try rejected)."""
    metrics = [record.metrics for record in result.history]
    accepted = sum(m.get("n_new", 0) + m.get("n_duplicate_edits", 0) for m in metrics)
    return {"edits_accepted": accepted, "edits_rejected": sum(m.get("n_rejected_edits", 0) for m in metrics),
            "edits_dropped": sum(m.get("n_dropped_edits", 0) for m in metrics)}


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


if __name__ == "__main__":
    main()
