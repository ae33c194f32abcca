"""One benchmark, two revisions of agentbolt, in the same run: before/after a change.

The benchmark script is always this checkout's; only the ``agentbolt`` package it imports
changes: ``PYTHONPATH`` points at each tree and the benchmark runs in it, so the
subprocesses it starts import the same one, and a ``sitecustomize`` takes an editable
install's finder off ``sys.meta_path``, so a module the tree lacks is an ImportError, never
this checkout's. The *before* tree is ``git archive REV`` unpacked in a temporary
directory (or a directory given instead of REV: another checkout); the *after* tree is
this checkout (or ``--after``). Rounds alternate before, after, after, before, … so a
machine that gets busier or quieter during the run weighs on both alike; the table gives
the median of each measure per revision and after / before. A benchmark that imports a
module the older tree does not have fails on it, saying so.

    python benchmarks/compare_revisions.py d5607d5^ --rounds 3 \\
        --measure added_p50_ms,added_p99_ms,gateway_rps_16 -- gateway_overhead.py --json --seconds 3
    python benchmarks/compare_revisions.py d5607d5^ --key backend,concurrency \\
        --measure rollouts_per_s -- store_throughput.py --json --backends sqlite,http --concurrency 16

The benchmark must print its results as JSON lines (``--json``); ``--key`` names the
fields that tell its rows apart, ``--measure`` the numbers to compare (default: every
floating-point field). ``--json`` here prints the table as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent


def unpack(rev: str, into: Path) -> Path:
    """The tracked files of ``rev`` under ``into`` (``git archive``); a ``rev`` that is a
    directory holding an ``agentbolt`` package (another checkout) is used as it is."""
    if (Path(rev) / "agentbolt" / "__init__.py").is_file():
        return Path(rev).resolve()
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "tree.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    archive.unlink()
    return into / "tree"


NO_EDITABLE = """\
# Written by benchmarks/compare_revisions.py: an editable install of agentbolt puts a finder
# on sys.meta_path that would hand out this checkout's modules wherever the tree under
# test lacks one; only the tree's agentbolt may be imported.
import sys
sys.meta_path[:] = [f for f in sys.meta_path if not str(getattr(f, "__module__", "")).startswith("__editable__")]
"""


def run_once(tree: Path, command: list[str], shim: Path) -> list[dict[str, Any]]:
    """The benchmark's JSON lines, run with ``tree``'s agentbolt (and only it) on the path."""
    path = [str(shim), str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    probe = "import agentbolt, sys; print(agentbolt.__file__); print(any('editable' in repr(f) for f in sys.meta_path))"
    check = subprocess.run([sys.executable, "-c", probe], env=env, cwd=tree, capture_output=True, text=True, check=True)
    where, editable = check.stdout.split()
    if not Path(where).is_relative_to(tree) or editable != "False":
        raise SystemExit(f"agentbolt imported from {where} (editable finder left: {editable}), not only from {tree}")
    script = HERE / command[0]
    done = subprocess.run([sys.executable, str(script), *command[1:]], env=env, cwd=tree, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed on {tree} (exit {done.returncode}):\n{done.stderr[-3000:]}")
    rows = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    if not rows:
        raise SystemExit(f"{command[0]} printed no JSON line: pass it --json\n{done.stdout[-2000:]}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="the git revision (or another checkout's directory) measured as 'before'")
    parser.add_argument("--after", default=None, help="the 'after' revision or directory (default: this checkout)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per revision, alternating")
    parser.add_argument("--key", default="", help="comma-separated fields that identify a row")
    parser.add_argument("--measure", default="", help="comma-separated fields to compare (default: float fields)")
    parser.add_argument("--json", action="store_true", help="print the table as one JSON object")
    parser.epilog = "after --: the benchmark script (in benchmarks/) and its arguments"
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command or not (HERE / command[0]).is_file():
        parser.error("name a benchmark script of benchmarks/ after --, e.g. -- gateway_overhead.py --json")
    keys = [k for k in args.key.split(",") if k]
    wanted = [m for m in args.measure.split(",") if m]

    values: dict[tuple[str, str, str], list[float]] = defaultdict(list)  # (row, measure, which) -> values
    with tempfile.TemporaryDirectory(prefix="agentbolt-compare-") as tmp:
        shim = Path(tmp) / "shim"
        shim.mkdir()
        (shim / "sitecustomize.py").write_text(NO_EDITABLE)
        trees = {"before": unpack(args.before, Path(tmp) / "before")}
        trees["after"] = unpack(args.after, Path(tmp) / "after") if args.after else ROOT
        order = [("before", "after") if r % 2 == 0 else ("after", "before") for r in range(args.rounds)]
        for r, pair in enumerate(order, 1):
            for which in pair:
                print(f"round {r}/{args.rounds}: {which}", file=sys.stderr, flush=True)
                for row in run_once(trees[which], command, shim):
                    name = " ".join(f"{k}={row.get(k)}" for k in keys) or "-"
                    measures = wanted or [k for k, v in row.items() if isinstance(v, float)]
                    for m in measures:
                        if isinstance(row.get(m), (int, float)) and not isinstance(row.get(m), bool):
                            values[(name, m, which)].append(float(row[m]))

    table = []
    for name, m in sorted({(n, m) for n, m, _ in values}):
        before = statistics.median(values[(name, m, "before")]) if values[(name, m, "before")] else None
        after = statistics.median(values[(name, m, "after")]) if values[(name, m, "after")] else None
        ratio = after / before if before and after is not None else None
        table.append({"row": name, "measure": m, "before": before, "after": after, "after_over_before": ratio})
    if args.json:
        print(json.dumps({"before": args.before, "after": args.after or "checkout", "rounds": args.rounds,
                          "command": command, "cpus": os.cpu_count(), "rows": table}))
        return 0
    print(f"{' '.join(command)}: before {args.before}, after {args.after or 'this checkout'}, "
          f"median of {args.rounds} alternating rounds, {os.cpu_count()} cores")
    print(f"{'row':<34} {'measure':<22} {'before':>12} {'after':>12} {'after/before':>13}")
    for t in table:
        fmt = lambda v: "-" if v is None else f"{v:12.3f}"  # noqa: E731
        ratio = "-" if t["after_over_before"] is None else f"{t['after_over_before']:.3f}"
        print(f"{t['row']:<34} {t['measure']:<22} {fmt(t['before'])} {fmt(t['after'])} {ratio:>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
