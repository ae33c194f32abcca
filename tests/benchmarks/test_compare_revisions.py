"""benchmarks/compare_revisions.py: a benchmark run against two revisions of the package in
one run, each revision's agentbolt really the one imported, the medians compared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "compare_revisions.py"


def compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_same_revision_twice_gives_the_same_figures() -> None:
    """lineage_merging.py computes its figures from committed recordings: deterministic, so
    HEAD before and this checkout after (same package code here) agree exactly."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("needs the git history of the checkout")
    done = compare("HEAD", "--rounds", "2", "--key", "kind,name", "--measure", "once_before,once_after", "--json",
                   "--", "lineage_merging.py", "--json")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout.strip().splitlines()[-1])
    assert table["before"] == "HEAD" and table["rounds"] == 2
    rows = {(r["row"], r["measure"]): r for r in table["rows"]}
    assert ("kind=harness name=claude-code", "once_after") in rows
    assert all(r["before"] == r["after"] and r["after_over_before"] in (1.0, None) for r in rows.values())


def test_a_benchmark_that_is_not_there_is_a_usage_error() -> None:
    done = compare("HEAD", "--", "no_such_benchmark.py")
    assert done.returncode == 2 and "name a benchmark script of benchmarks/" in done.stderr
