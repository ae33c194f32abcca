"""mini-SWE-agent, unmodified and sandboxed, trained on generated repo tasks: untrained → SFT → GRPO.

    scripts/install_harnesses mini-swe-agent                   # once: mini-swe-agent 2.4.6 from PyPI
    python examples/harness_mini_swe_agent/train.py            # SmolLM2-135M on this CPU (cpu.yaml)
    python examples/harness_mini_swe_agent/train.py --smoke    # every stage, tiny (CI)
    python examples/harness_mini_swe_agent/train.py --config examples/harness_mini_swe_agent/gpu.yaml  # untested
    python examples/harness_mini_swe_agent/train.py --config examples/harness_mini_swe_agent/cluster.yaml  # untested

The agent is mini-SWE-agent 2.4.6 as installed from PyPI, run per rollout through its
harness profile (``Harness.for_("mini-swe-agent", ...)``: its own config in a fresh HOME,
its bash tool, litellm pointed at the gateway), in a bubblewrap sandbox with the task's
repo copied in. Each task is a tiny repo with a failing test (fix a constant, rename a
function, create a file; ``repo_tasks.py``); ``grade.py`` runs the repo's tests on the
workspace the agent left. Held-out repos come from another seed prefix.

The ladder (``stages.py``), every stage scored greedily on the same held-out tasks:

1. **untrained** — SmolLM2 as it is (it answers in prose, never calls ``bash``: reward 0);
2. **SFT** — a scripted teacher (``teacher.py``, training tasks only) plays the model;
   mini-SWE-agent's episodes against it are recorded through the gateway, and SmolLM2 is
   fine-tuned (LoRA) on its calls, rendered exactly as the gateway serves SmolLM2;
3. **SFT+GRPO** — GRPO on the training tasks from the SFT LoRA.

Everything runs in this process (the engine behind one gateway every stage shares, the
store, the runner); each mini-SWE-agent is a sandboxed child process. Settings come from a
YAML file (``--config``, default ``cpu.yaml`` next to this file), then from the flags.
The table goes to ``--run-dir``/ladder.md and ladder.json.

``cluster.yaml`` is the same ladder at cluster scale: its ``cluster`` section names the
policy trained in this process, the engine servers (SGLang or vLLM replicas) behind the
gateway of the server each stage starts on a PostgreSQL store, and the runners started
elsewhere (``agentbolt runner --agent .../cluster_runner.py:harness``) that run
mini-SWE-agent in their sandboxes on the task repos under ``run_dir`` (a shared file
system). See docs/scale-out.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # repo_tasks.py, stages.py, teacher.py; examples/_common

import stages  # noqa: E402
from _common import pct  # noqa: E402
from _common.cluster import cluster_gateway  # noqa: E402
from _common.settings import load_config  # noqa: E402
from repo_tasks import make_tasks  # noqa: E402

from agentbolt.runner.harness import Harness, Limits, Sandbox  # noqa: E402
from agentbolt.runner.harness.profiles import MiniSweAgent  # noqa: E402

STAGES = ("untrained", "sft", "grpo")
DEFAULT_CONFIG = HERE / "cpu.yaml"
EVALUATOR = [sys.executable, str(HERE / "grade.py")]
RUNNER_AGENT = "examples/harness_mini_swe_agent/cluster_runner.py:harness"
"""With a ``cluster`` section: what the runners load (``agentbolt runner --agent``, run from
the repository root; each stage prints that command) — mini-SWE-agent runs there, not here."""
SMOKE: dict[str, Any] = {"train_size": 3, "val_size": 2, "sft_epochs": 1, "grpo_steps": 1, "tasks_per_step": 2,
                         "group_size": 2, "concurrency": 4}


def parse_args(argv: list[str] | None = None) -> dict[str, Any]:
    """Settings: the YAML config, overridden by the flags given, then by ``--smoke``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML settings (cpu.yaml, gpu.yaml)")
    p.add_argument("--smoke", action="store_true", help="every stage with a few tasks and one tiny step")
    p.add_argument("--stages", help=f"comma-separated, in order: {','.join(STAGES)} (sft before grpo)")
    p.add_argument("--run-dir", help="outputs; emptied first (default runs/harness_mini_swe_agent)")
    for name in ("train-size", "val-size", "grpo-steps", "tasks-per-step", "group-size", "sft-epochs", "seed",
                 "agent-steps", "concurrency"):
        p.add_argument(f"--{name}", type=int)
    p.add_argument("--threads", type=int, help="torch threads (engine and updates; overrides engine.num_threads)")
    p.add_argument("--grpo-minutes", type=float, help="GRPO time budget (the held-out evaluation comes on top)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    settings = load_config(Path(args.config), DEFAULT_CONFIG)
    settings.update({k: v for k, v in vars(args).items() if v is not None and k not in ("config", "smoke", "quiet")})
    if args.smoke:
        settings.update(SMOKE)
    settings["smoke"] = args.smoke
    settings["progress"] = not args.quiet
    if (cluster := settings.get("cluster")) is not None:  # the model is the cluster's; cpu.yaml's keys stay
        settings["policy_model"] = cluster["policy_model"]
        settings["served_model"] = cluster.get("served_model", cluster["policy_model"])
    raw = settings.get("stages", STAGES)
    settings["stages"] = [s.strip() for s in (raw.split(",") if isinstance(raw, str) else raw) if s.strip()]
    if unknown := [s for s in settings["stages"] if s not in STAGES]:
        p.error(f"unknown stages {unknown}; use some of {', '.join(STAGES)}")
    return settings


def build_gateway(settings: dict[str, Any]) -> Any:
    """The one gateway (and engine) every stage uses, built from ``settings["engine"]``;
    with a ``cluster`` section, the description of the gateway (in front of its engine
    servers) that each stage's server holds."""
    from agentbolt.engines import EngineSpec
    from agentbolt.gateway import Gateway, GatewayConfig

    greedy = {"temperature": 0.0}  # every evaluation is greedy; GRPO sets its training calls to T=1 itself
    if settings.get("cluster") is not None:
        return cluster_gateway(settings["cluster"], sampling={"val": dict(greedy), "test": dict(greedy)})
    engine = dict(settings["engine"])
    if settings.get("threads"):
        engine["num_threads"] = settings["threads"]
    spec = EngineSpec(**engine)
    if spec.kind == "transformers":
        import torch

        torch.manual_seed(settings["seed"])
        if spec.device == "cpu" and spec.num_threads:
            torch.set_num_threads(spec.num_threads)  # the updates in this process, like the engine
    return Gateway(spec.build(), GatewayConfig(sampling={"val": dict(greedy), "test": dict(greedy)}))


def make_harness(settings: dict[str, Any]) -> Harness:
    """mini-SWE-agent through its profile, in a sandbox with the task's repo as its workspace."""
    sandbox = Sandbox(task_workspace_field="repo", limits=Limits(processes=32, cpu_seconds=300, file_mb=16))
    return Harness.for_(
        MiniSweAgent(step_limit=settings["agent_steps"], command_timeout=settings["command_timeout"]),
        task="{problem}", model=settings["served_model"], evaluator=EVALUATOR, timeout=600,
        concurrency=settings["concurrency"], sandbox=sandbox,
    )


def make_run(settings: dict[str, Any], run_dir: Path, train: list[dict[str, Any]],
             heldout: list[dict[str, Any]]) -> stages.Run:
    """What every stage shares: the store (SQLite in ``run_dir``, or the cluster's), the
    gateway, the harness (on a cluster: the runners' reference to it) and the tasks."""
    cluster = settings.get("cluster")
    if cluster is None:
        store, harness = f"sqlite:///{run_dir / 'store.db'}", make_harness(settings)
    else:
        store, harness = cluster["store"], RUNNER_AGENT
    return stages.Run(settings, run_dir, store, build_gateway(settings), harness, train, heldout)


def table(results: list[stages.Stage]) -> str:
    """The ladder as a Markdown table."""
    lines = ["| stage | held-out success | constant / rename / create | wall |", "|---|---:|---|---:|"]
    for st in results:
        kinds = " / ".join(st.kinds.get(k, "-") for k in ("constant", "rename", "create"))
        lines.append(f"| {st.name} | {pct(st.success)} (n={st.scored}) | {kinds} | {st.wall_s / 60:.1f} min |")
    by_name = {st.name: st for st in results}
    for name in ("SFT", "SFT+GRPO"):
        base, top = by_name.get("untrained"), by_name.get(name)
        if base and top and base.success is not None and top.success is not None:
            gain = 100 * (top.success - base.success)
            lines.append(f"\n{name} vs untrained on the held-out tasks: {gain:+.1f} points")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    settings = parse_args(argv)
    run_dir = Path(settings.get("run_dir", "runs/harness_mini_swe_agent"))
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    tasks = run_dir / "tasks"
    train = make_tasks(tasks, settings["train_size"], settings["seed"], "train")
    heldout = make_tasks(tasks, settings["val_size"], settings["seed"], "heldout")
    run = make_run(settings, run_dir, train, heldout)
    results: list[stages.Stage] = []
    for name in settings["stages"]:
        stage = getattr(stages, name)(run)
        results.append(stage)
        stages.save(results, run_dir / "ladder.json")
        print(f"{stage.name}: held-out {pct(stage.success)} {stage.kinds}, {stage.wall_s / 60:.1f} min, "
              f"load {os.getloadavg()[0]:.2f}")
    wall = time.perf_counter() - t0
    load = f"load average {load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    text = table(results) + f"\n\nwhole ladder: {wall / 60:.1f} min wall; {load}"
    (run_dir / "ladder.md").write_text(text + "\n")
    print("\n" + text)
    if settings["smoke"]:
        problems = smoke_problems(results, settings)
        for problem in problems:
            print(f"smoke check failed: {problem}", file=sys.stderr)
        if problems:
            raise SystemExit(1)
        print("smoke check passed")
    return {"stages": [st.to_json() for st in results], "wall_s": wall, "run_dir": str(run_dir),
            "load_start": list(load_start), "load_end": list(os.getloadavg())}


def smoke_problems(results: list[stages.Stage], settings: dict[str, Any]) -> list[str]:
    """What a smoke run must show: every stage scored every held-out task with no broken
    rollout; the teacher's episodes all fixed their repos through mini-SWE-agent and SFT
    trained on the call of each; the GRPO step ran all its rollouts with model calls."""
    problems = []
    for st in results:
        if st.scored != settings["val_size"] or st.details.get("failed"):
            problems.append(f"{st.name}: {st.scored} of {settings['val_size']} held-out tasks scored, "
                            f"{st.details.get('failed')} rollouts failed")
    by_name = {st.name: st for st in results}
    if (sft := by_name.get("SFT")) is not None:
        d = sft.details
        if d.get("teacher_success") != 1.0 or d.get("teacher_episodes") != settings["train_size"]:
            problems.append(f"the teacher's episodes did not all fix their repos: {d}")
        if d.get("records") != [settings["train_size"]] or not d.get("trained_tokens"):
            problems.append(f"SFT did not train on the call of every teacher episode: {d}")
    if (top := by_name.get("SFT+GRPO")) is not None:
        steps = top.details.get("steps") or []
        if len(steps) != 1 or steps[0].get("rollouts/failed") or not steps[0].get("calls/per_rollout"):
            problems.append(f"the GRPO step did not run all its rollouts with model calls: {steps}")
    return problems


if __name__ == "__main__":
    from agentbolt.algorithms.failures import NoSuccessfulRolloutsError

    try:
        out = main()
    except NoSuccessfulRolloutsError as exc:
        sys.exit(f"\nstopped: {exc}")
    print(json.dumps({"wall_minutes": round(out["wall_s"] / 60, 1)}))
