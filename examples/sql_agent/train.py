"""Text-to-SQL, the whole ladder on one task: untrained → APO → SFT from a teacher → GRPO.

    python examples/sql_agent/train.py                    # SmolLM2-135M on this CPU (cpu.yaml)
    python examples/sql_agent/train.py --smoke            # every stage, tiny, in a couple of minutes (CI)
    python examples/sql_agent/train.py --stages untrained,sft,grpo
    python examples/sql_agent/train.py --config examples/sql_agent/gpu.yaml   # 1.5B coder on a GPU (untested)

The agent (``agent.py``, LangGraph) writes a SQLite query, runs it, reads the rows or
the error, accepts or rewrites; its reward is the execution match of its last query
(``grader.py``). Data (``data.py``): six generated databases, training questions on
four schemas; held out: other questions on those schemas, and two schemas never trained
on. Every stage is scored on the same held-out questions, greedily; the table goes to
``--run-dir``/ladder.md and ladder.json.

Settings come from a YAML file (``--config``, default ``cpu.yaml`` next to this file),
then from the flags; the code is the same on a CPU and on a GPU.
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
sys.path[:0] = [str(HERE), str(HERE.parent)]  # this example's modules; examples/_common

import stages
from _common.settings import load_config
from data import build, load_split
from spider import load_spider

STAGES = ("untrained", "apo", "sft", "grpo")
DEFAULT_CONFIG = HERE / "cpu.yaml"
SMOKE: dict[str, Any] = {
    "train_size": 6, "val_size": 2, "apo_val_size": 2, "apo_train_batch": 2, "apo_rounds": 1, "apo_beam": 1,
    "apo_branch": 1, "sft_epochs": 1, "grpo_steps": 1, "tasks_per_step": 2, "group_size": 2, "concurrency": 8,
}


def parse_args(argv: list[str] | None = None) -> dict[str, Any]:
    """Settings: the YAML config, overridden by the flags given, then by ``--smoke``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML settings (cpu.yaml, gpu.yaml)")
    p.add_argument("--smoke", action="store_true", help="every stage with a few questions and one tiny step")
    p.add_argument("--stages", help=f"comma-separated, in order: {','.join(STAGES)} (sft before grpo)")
    p.add_argument("--run-dir", help="outputs; emptied first (default runs/sql_agent)")
    p.add_argument("--spider", help="a Spider directory (tables.json, train_spider.json, dev.json, database/) "
                                    "instead of the generated data")
    for name in ("train-size", "val-size", "grpo-steps", "tasks-per-step", "group-size", "sft-epochs", "seed"):
        p.add_argument(f"--{name}", type=int)
    p.add_argument("--threads", type=int, help="torch threads of the local engine (overrides engine.num_threads)")
    p.add_argument("--grpo-minutes", type=float, help="GRPO time budget (the held-out evaluation comes on top)")
    p.add_argument("--critic-endpoint", help="an OpenAI-compatible endpoint (with /v1) as APO's critic and editor")
    p.add_argument("--critic-model")
    p.add_argument("--critic-api-key")
    p.add_argument("--tiny", action="store_true",
                   help="a seeded random tiny model instead of the config's engine model: checks the path, learns nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    settings = load_config(Path(args.config), DEFAULT_CONFIG)
    given = {k: v for k, v in vars(args).items() if v is not None and k not in ("config", "smoke", "quiet", "tiny")}
    settings.update(given)
    if args.smoke:
        settings.update(SMOKE)
        settings["engine"] = {**settings.get("engine", {}), "max_batch_size": 8}
    settings["progress"] = not args.quiet
    settings["tiny"] = args.tiny
    raw = settings.get("stages", STAGES)
    settings["stages"] = [s.strip() for s in (raw.split(",") if isinstance(raw, str) else raw) if s.strip()]
    unknown = [s for s in settings["stages"] if s not in STAGES]
    if unknown:
        p.error(f"unknown stages {unknown}; use some of {', '.join(STAGES)}")
    if "grpo" in settings["stages"] and "sft" not in settings["stages"]:
        print("note: GRPO without SFT starts from the untrained model, which rarely succeeds (little to learn from)")
    if settings.get("critic_endpoint") and not settings.get("critic_model"):
        p.error("--critic-endpoint needs --critic-model")
    return settings


def save_tiny_model(path: Path) -> Path:
    """A seeded random tiny chat model (SmolLM2's tokenizer) saved as a model directory."""
    from agentbolt.models import tiny_model

    model, tokenizer = tiny_model(seed=0)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_gateway(settings: dict[str, Any], run_dir: Path) -> Any:
    """The one gateway (and engine) every stage uses, built from ``settings["engine"]``."""
    from agentbolt.engines import EngineSpec
    from agentbolt.gateway import Gateway, GatewayConfig

    engine = dict(settings["engine"])
    if settings.get("threads"):
        engine["num_threads"] = settings["threads"]
    if settings.get("tiny"):
        engine.update(kind="transformers", path=str(save_tiny_model(run_dir / "tiny-model")), device="cpu")
    spec = EngineSpec(**engine)
    if spec.kind == "transformers":
        import torch

        torch.manual_seed(settings["seed"])
        if spec.device == "cpu" and spec.num_threads:
            torch.set_num_threads(spec.num_threads)
    greedy = {"temperature": 0.0}  # every evaluation is greedy; GRPO sets its training calls to T=1 itself
    return Gateway(spec.build(), GatewayConfig(sampling={"val": dict(greedy), "test": dict(greedy)}))


def datasets(settings: dict[str, Any], run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(train, held-out)``: the generated splits, or Spider's (``--spider DIR``: its
    ``train_spider.json`` to train on, ``dev.json``, whose databases training never sees,
    as the held-out schemas)."""
    if settings.get("spider"):
        root = Path(settings["spider"])
        return (load_spider(root, "train_spider.json", n=settings["train_size"], split="train"),
                load_spider(root, "dev.json", n=settings["val_size"], split="heldout_schemas"))
    data_dir = build(run_dir / "data")
    return (load_split("train", settings["train_size"], data_dir=data_dir),
            load_split("heldout_questions", settings["val_size"], data_dir=data_dir)
            + load_split("heldout_schemas", settings["val_size"], data_dir=data_dir))


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def table(results: list[stages.Stage], settings: dict[str, Any]) -> str:
    """The ladder as a Markdown table."""
    lines = ["| stage | held-out questions (training schemas) | held-out schemas | wall |", "|---|---:|---:|---:|"]
    for st in results:
        q, sch = (st.accuracy.get(k) for k in stages.HELDOUT_SPLITS)
        nq, ns = (st.scored.get(k, 0) for k in stages.HELDOUT_SPLITS)
        lines.append(f"| {st.name} | {_pct(q)} (n={nq}) | {_pct(sch)} (n={ns}) | {st.wall_s / 60:.1f} min |")
    base = next((st for st in results if st.name == "untrained"), None)
    top = next((st for st in results if st.name == "SFT+GRPO"), None)
    if base and top and None not in (base.accuracy["heldout_questions"], top.accuracy["heldout_questions"]):
        gain = 100 * (top.accuracy["heldout_questions"] - base.accuracy["heldout_questions"])  # type: ignore[operator]
        lines.append(f"\nSFT+GRPO vs untrained on held-out questions of training schemas: {gain:+.1f} points")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    settings = parse_args(argv)
    run_dir = Path(settings.get("run_dir", "runs/sql_agent"))
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    train, heldout = datasets(settings, run_dir)
    run = stages.Run(settings, run_dir, f"sqlite:///{run_dir / 'store.db'}", build_gateway(settings, run_dir), train, heldout)
    results: list[stages.Stage] = []
    for name in settings["stages"]:
        stage = getattr(stages, name)(run)
        results.append(stage)
        stages.save(results, run_dir / "ladder.json")
        print(f"{stage.name}: held-out questions {_pct(stage.accuracy['heldout_questions'])}, "
              f"held-out schemas {_pct(stage.accuracy['heldout_schemas'])}, {stage.wall_s / 60:.1f} min")
    wall = time.perf_counter() - t0
    text = table(results, settings) + f"\n\nwhole ladder: {wall / 60:.1f} min wall"
    (run_dir / "ladder.md").write_text(text + "\n")
    print("\n" + text)
    return {"stages": [st.to_json() for st in results], "wall_s": wall, "run_dir": str(run_dir)}


if __name__ == "__main__":
    from agentbolt.algorithms.failures import NoSuccessfulRolloutsError

    try:
        out = main()
    except NoSuccessfulRolloutsError as exc:
        sys.exit(f"\nstopped: {exc}")
    print(json.dumps({"wall_minutes": round(out["wall_s"] / 60, 1)}))
