"""benchmarks/compare_revisions.py: a benchmark run against two revisions of the package in
one run, each revision's agentbolt really the one imported, the medians compared."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "compare_revisions.py"


def compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_same_tree_twice_gives_the_same_figures(tmp_path: Path) -> None:
    """lineage_merging.py computes its figures from committed recordings: deterministic, so
    a copy of this checkout's package before and the checkout after agree exactly (a
    directory stands for a revision, so no git history is needed)."""
    shutil.copytree(ROOT / "agentbolt", tmp_path / "agentbolt", ignore=shutil.ignore_patterns("__pycache__"))
    done = compare(str(tmp_path), "--rounds", "2", "--key", "kind,name", "--measure", "once_before,once_after",
                   "--json", "--", "lineage_merging.py", "--json")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout.strip().splitlines()[-1])
    assert table["before"] == str(tmp_path) and table["rounds"] == 2
    rows = {(r["row"], r["measure"]): r for r in table["rows"]}
    assert ("kind=harness name=claude-code", "once_after") in rows
    assert all(r["before"] == r["after"] and r["after_over_before"] in (1.0, None) for r in rows.values())


def test_a_benchmark_that_is_not_there_is_a_usage_error() -> None:
    done = compare(str(ROOT), "--", "no_such_benchmark.py")
    assert done.returncode == 2 and "name a benchmark script of benchmarks/" in done.stderr
