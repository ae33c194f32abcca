"""Each recipe's ``cpu.yaml`` is what its ``train.py`` runs without flags; its
``cluster.yaml`` has the same settings (at cluster scale) and a ``cluster`` section from
which ``train.py`` builds the trainers docs/scale-out.md describes: the policy trained
here, engine replicas (vLLM for calc, SGLang for mini-SWE-agent) behind the gateway of the
server it starts on PostgreSQL, runners started elsewhere. (Built, not run: no GPU or
cluster here.) In a subprocess: each train.py puts its directory on ``sys.path``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CALC, MINI = EXAMPLES / "calc", EXAMPLES / "harness_mini_swe_agent"

CALC_PROBE = """
import json, sys
from pathlib import Path
from typing import Any
sys.path[:0] = [sys.argv[1]]
import train
out = {"defaults": vars(train.parse_args([])), "cpu": vars(train.parse_args(["--config", sys.argv[2]]))}
args = train.parse_args(["--config", sys.argv[3]])
t = train.build_trainer(args, Path(sys.argv[4]))
c = t.algorithm.config
out["cluster"] = {
    "strategy": type(t.strategy).__name__, "host": t.strategy.host, "store": t.store,
    "engine": t.gateway.engine.model_dump(exclude_none=True), "cooldown": t.gateway.config.replica_cooldown_s,
    "model": t.algorithm.model, "grpo": [c.tasks_per_step, c.group_size, c.dtype, c.sharding, c.lora_dir],
}
print(json.dumps(out, default=str))
"""

MINI_PROBE = """
import json, os, sys
from pathlib import Path
from typing import Any
sys.path[:0] = [sys.argv[1]]
os.environ["AGENTBOLT_ADMIN_TOKEN"] = "one-token-for-every-stage"
import train  # puts examples/ on sys.path, for stages' _common
import stages
settings = train.parse_args(["--config", sys.argv[2]])
run = train.make_run(settings, Path(sys.argv[3]), [], [])
sft = run.trainer(stages.SFT(stages.sft_config(run), rollouts=["ro-1"], model=settings["policy_model"]))
grpo = run.trainer(stages.GRPO(stages.grpo_config(run), model=settings["policy_model"]))
s, g = sft.algorithm.config, grpo.algorithm.config
out = {
    "strategies": [type(t.strategy).__name__ for t in (sft, grpo)],
    "tokens": [t.strategy.admin_token for t in (sft, grpo)],
    "stores": [sft.store, grpo.store], "engine": grpo.gateway.engine.model_dump(exclude_none=True),
    "sampling": grpo.gateway.config.sampling, "models": [sft.algorithm.model, grpo.algorithm.model],
    "sft": [s.dtype, s.sharding, s.gradient_checkpointing, s.epochs], "grpo": [g.dtype, g.device, g.sharding,
    g.tasks_per_step, g.group_size, g.max_steps], "served_model": settings["served_model"],
    "runner_agent": run.harness,
}
print(json.dumps(out, default=str))
"""


def _probe(code: str, *argv: Path) -> Any:
    out = subprocess.run([sys.executable, "-c", code, *map(str, argv)], check=False, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_calc_cpu_yaml_is_the_scripts_defaults_and_cluster_yaml_builds_the_scaled_out_trainer(tmp_path: Path) -> None:
    got = _probe(CALC_PROBE, CALC, CALC / "cpu.yaml", CALC / "cluster.yaml", tmp_path)
    assert got["cpu"] == {**got["defaults"], "config": str(CALC / "cpu.yaml")}
    cl = got["cluster"]
    assert cl["strategy"] == "ExternalStrategy" and cl["host"] == "0.0.0.0"
    assert cl["store"].startswith("postgresql://")
    assert cl["engine"]["kind"] == "vllm" and len(cl["engine"]["url"]) == 3
    assert cl["model"] == cl["engine"]["model"] == "Qwen/Qwen2.5-1.5B-Instruct" and cl["cooldown"] == 10.0
    assert cl["grpo"] == [64, 8, "bfloat16", "none", "/shared/agentbolt/calc/loras"]


def test_mini_swe_agent_cluster_yaml_builds_every_stages_trainer_on_sglang_replicas(tmp_path: Path) -> None:
    got = _probe(MINI_PROBE, MINI, MINI / "cluster.yaml", tmp_path)
    assert got["strategies"] == ["ExternalStrategy"] * 2
    assert got["tokens"] == ["one-token-for-every-stage"] * 2  # the runners' --token holds for every stage
    assert all(store.startswith("postgresql://") for store in got["stores"])
    engine = got["engine"]
    assert engine["kind"] == "sglang" and len(engine["url"]) == 3
    assert engine["tokenizer"] == "Qwen/Qwen2.5-Coder-7B-Instruct" and engine["tool_parser"] == "hermes"
    assert got["sampling"] == {"val": {"temperature": 0.0}, "test": {"temperature": 0.0}}  # greedy evaluations
    assert got["models"] == ["Qwen/Qwen2.5-Coder-7B-Instruct"] * 2 == [got["served_model"]] * 2
    assert got["sft"] == ["bfloat16", "none", True, 2]
    assert got["grpo"] == ["bfloat16", "cuda", "none", 8, 8, 40]
    assert got["runner_agent"] == "examples/harness_mini_swe_agent/cluster_runner.py:harness"  # in the runner command


RUNNER_PROBE = """
import json, sys
sys.path[:0] = [sys.argv[1]]
import cluster_runner  # what `agentbolt runner --agent examples/.../cluster_runner.py:harness` loads
h = cluster_runner.harness
print(json.dumps([h.profile.model, h.profile.profile.step_limit, h.concurrency]))
"""


@pytest.mark.skipif(os.environ.get("AGENTBOLT_HARNESS_MATRIX") == "0",
                    reason="mini-SWE-agent is not installed with the harness matrix off (AGENTBOLT_HARNESS_MATRIX=0)")
def test_the_runners_build_mini_swe_agents_harness_from_cluster_yaml() -> None:
    assert _probe(RUNNER_PROBE, MINI) == ["Qwen/Qwen2.5-Coder-7B-Instruct", 8, 32]


SCALE = {
    # and, for a 1.5B model, half the 135M model's learning rate
    "calc": (CALC, {"steps", "minutes", "tasks_per_step", "train_size", "val_size", "run_dir", "lr"}),
    # the ladder's scale, and what a 7B model is given: room to work in several calls, a lower
    # learning rate, a larger LoRA and token budget
    "harness_mini_swe_agent": (MINI, {"train_size", "val_size", "grpo_steps", "grpo_minutes", "tasks_per_step",
                                      "group_size", "concurrency", "sft_epochs", "run_dir", "agent_steps",
                                      "command_timeout", "sft_lr", "sft_batch_size", "grpo_lr", "lora_r",
                                      "micro_batch_tokens"}),
}


@pytest.mark.parametrize("recipe", sorted(SCALE))
def test_cluster_yaml_has_every_setting_of_cpu_yaml_and_changes_only_scale(recipe: str) -> None:
    folder, scale = SCALE[recipe]
    cpu = yaml.safe_load((folder / "cpu.yaml").read_text())
    cluster = yaml.safe_load((folder / "cluster.yaml").read_text())
    assert set(cluster) - {"cluster"} == set(cpu)
    assert {k for k in cpu if cpu[k] != cluster[k]} == scale
