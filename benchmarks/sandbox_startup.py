"""Per-rollout cost of the harness sandbox (bubblewrap + namespaces + the relay init).

Runs a program that does nothing (``/bin/true``) ``--runs`` times two ways, one after
the other, and prints the median and 90th percentile wall-clock milliseconds:

* ``plain`` — :class:`~agentbolt.runner.harness.LocalExecutor`, a bare subprocess;
* ``sandboxed`` — a :class:`~agentbolt.runner.harness.sandbox.SandboxSession` per run, as the
  harness makes one per rollout: the workspace copied (``--files`` small files), the
  gateway relay's socket served, bubblewrap's namespaces and mounts built, the init
  started (relay, limits, watchdog), the program run, its tree killed, the report read.

The sandbox's cost per rollout is ``sandboxed - plain``. A program that calls its model
pays about one extra loopback connection per request (the relay); not measured here.

    python benchmarks/sandbox_startup.py              # 30 runs each
    python benchmarks/sandbox_startup.py --json       # for scripts
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentbolt.runner.harness.local import LocalExecutor, ProcessSpec
from agentbolt.runner.harness.sandbox import Sandbox, SandboxSession

ENV = {"PATH": "/usr/bin:/bin"}


async def _plain(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        await LocalExecutor().run(ProcessSpec(argv=["/bin/true"], env=dict(ENV), timeout=30))
        times.append((time.perf_counter() - t) * 1000)
    return times


async def _sandboxed(runs: int, files: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as source:
        for i in range(files):
            Path(source, f"file{i}.txt").write_text("x" * 1000)
        config = Sandbox(workspace=Path(source))
        for i in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                t = time.perf_counter()
                async with SandboxSession(config, Path(tmp), {}, "http://127.0.0.1:8000", f"ro-{i}", "at-1") as box:
                    result, _ = await box.run(
                        LocalExecutor(), ProcessSpec(argv=["/bin/true"], env=dict(ENV), timeout=30), None, None
                    )
                times.append((time.perf_counter() - t) * 1000)
                if result.exit_code != 0:
                    raise SystemExit(f"the sandboxed program failed: {result.stderr_tail}")
    return times


def _stats(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 1), "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--files", type=int, default=20, help="small files in the task workspace")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    asyncio.run(_sandboxed(2, args.files))  # warm up: the bubblewrap check, the page cache
    plain = _stats(asyncio.run(_plain(args.runs)))
    boxed = _stats(asyncio.run(_sandboxed(args.runs, args.files)))
    cost = {k: round(boxed[k] - plain[k], 1) for k in plain}
    result = {"runs": args.runs, "files": args.files, "plain": plain, "sandboxed": boxed, "sandbox_cost": cost}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'':12}{'median ms':>12}{'p90 ms':>10}   ({args.runs} runs, workspace of {args.files} files)")
    for name, row in (("plain", plain), ("sandboxed", boxed), ("cost", cost)):
        print(f"{name:12}{row['median_ms']:>12}{row['p90_ms']:>10}")
    print(f"machine: {sys.platform}, load {Path('/proc/loadavg').read_text().split()[0]}")


if __name__ == "__main__":
    main()
