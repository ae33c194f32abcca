"""``examples/calc/cpu.yaml`` is what ``train.py`` runs without flags; ``cluster.yaml`` has
the same settings (at cluster scale) and a ``cluster`` section from which ``train.py``
builds the trainer docs/scale-out.md describes: the policy trained here, vLLM replicas
behind the gateway of the server it starts on PostgreSQL, runners started elsewhere.
(Built, not run: no GPU or cluster here.) In a subprocess: train.py puts its directory on
``sys.path``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

CALC = Path(__file__).resolve().parents[2] / "examples" / "calc"

PROBE = """
import json, sys
from pathlib import Path
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


def _probe(tmp_path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(CALC), str(CALC / "cpu.yaml"), str(CALC / "cluster.yaml"),
                          str(tmp_path)], check=False, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_cpu_yaml_is_the_scripts_defaults_and_cluster_yaml_builds_the_scaled_out_trainer(tmp_path: Path) -> None:
    got = _probe(tmp_path)
    assert got["cpu"] == {**got["defaults"], "config": str(CALC / "cpu.yaml")}
    cl = got["cluster"]
    assert cl["strategy"] == "ExternalStrategy" and cl["host"] == "0.0.0.0"
    assert cl["store"].startswith("postgresql://")
    assert cl["engine"]["kind"] == "vllm" and len(cl["engine"]["url"]) == 3
    assert cl["model"] == cl["engine"]["model"] == "Qwen/Qwen2.5-1.5B-Instruct" and cl["cooldown"] == 10.0
    assert cl["grpo"] == [64, 8, "bfloat16", "none", "/shared/agentbolt/calc/loras"]


def test_cluster_yaml_has_every_setting_of_cpu_yaml_and_changes_only_scale() -> None:
    cpu = yaml.safe_load((CALC / "cpu.yaml").read_text())
    cluster = yaml.safe_load((CALC / "cluster.yaml").read_text())
    assert set(cluster) - {"cluster"} == set(cpu)
    scale = {"steps", "minutes", "tasks_per_step", "train_size", "val_size", "run_dir"}
    assert {k for k in cpu if cpu[k] != cluster[k]} == scale
