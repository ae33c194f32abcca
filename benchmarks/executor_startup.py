"""Start-up cost per rollout of each executor: local, bubblewrap, Docker cold and warm.

Runs a program that does nothing (``true``) ``--runs`` times each way, one after the
other, and prints the median and 90th percentile wall-clock milliseconds from "run this
spec" to "here is its result" (nothing else runs in between):

* ``local`` — :class:`~agentbolt.runner.harness.LocalExecutor`, a bare subprocess;
* ``bubblewrap`` — a :class:`~agentbolt.runner.harness.sandbox.SandboxSession` per run
  (workspace copy, relay socket, namespaces, the init), as the harness makes per rollout;
* ``docker_cold`` — :class:`~agentbolt.runner.harness.docker.DockerExecutor`: a container
  created, started (agentbolt's init on the image's python3), waited for, its logs and
  report read, removed;
* ``docker_warm`` — the same with a warm pool: the container was started before the run
  (the pool refills between runs, untimed), so a run pays the launch script, the init,
  the wait and the removal.

The Docker image is ``agentbolt-base:host`` (``build_host_base_image()``: busybox, this
machine's python3 and curl). Needs bubblewrap and a Docker Engine; a missing one is
reported and skipped.

    python benchmarks/executor_startup.py              # 20 runs each
    python benchmarks/executor_startup.py --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from agentbolt.runner.harness.local import LocalExecutor, ProcessResult, ProcessSpec
from agentbolt.runner.harness.sandbox import Sandbox, SandboxSession

ENV = {"PATH": "/usr/bin:/bin"}


def _spec() -> ProcessSpec:
    return ProcessSpec(argv=["true"], env=dict(ENV), timeout=30)


async def _timed(runs: int, once: Callable[[int], Awaitable[ProcessResult]],
                 between: Callable[[], Awaitable[None]] | None = None) -> list[float]:
    times = []
    for i in range(runs):
        if between is not None:
            await between()
        t = time.perf_counter()
        result = await once(i)
        times.append((time.perf_counter() - t) * 1000)
        if result.exit_code != 0:
            raise SystemExit(f"the program failed: {result.stderr_tail}")
    return times


async def _local(runs: int) -> list[float]:
    return await _timed(runs, lambda _: LocalExecutor().run(_spec()))


async def _bubblewrap(runs: int) -> list[float]:
    async def once(i: int) -> ProcessResult:
        with tempfile.TemporaryDirectory() as tmp:
            async with SandboxSession(Sandbox(), Path(tmp), {}, "http://127.0.0.1:8000", f"ro-{i}", "at-1") as box:
                result, _ = await box.run(LocalExecutor(), _spec(), None, None)
                return result

    return await _timed(runs, once)


async def _docker(runs: int, warm: bool) -> list[float]:
    from agentbolt.runner.harness.docker import DockerExecutor, build_host_base_image

    image = build_host_base_image()
    executor = DockerExecutor(image, owner="benchmark", warm=1 if warm else 0)
    await executor.prepare(None)  # the image check, once (as before a run starts claiming)
    state = executor._state
    assert state is not None

    async def refill() -> None:
        await state.pool.fill(image)

    try:
        return await _timed(runs, lambda _: executor.run(_spec()), refill if warm else None)
    finally:
        await executor.close()


def _stats(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 1), "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    ways: dict[str, Callable[[int], Awaitable[list[float]]]] = {
        "local": _local, "bubblewrap": _bubblewrap,
        "docker_cold": lambda n: _docker(n, warm=False), "docker_warm": lambda n: _docker(n, warm=True),
    }
    result: dict[str, object] = {"runs": args.runs}
    for name, way in ways.items():
        try:
            asyncio.run(way(2))  # warm up: checks, the page cache
            result[name] = _stats(asyncio.run(way(args.runs)))
        except Exception as exc:  # noqa: BLE001 - report the executor this machine cannot run, measure the rest
            result[name] = {"skipped": f"{type(exc).__name__}: {exc}"[:200]}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'':14}{'median ms':>12}{'p90 ms':>10}   ({args.runs} runs each, program: true)")
    for name in ways:
        row = result[name]
        assert isinstance(row, dict)
        if "skipped" in row:
            print(f"{name:14}  skipped: {row['skipped']}")
        else:
            print(f"{name:14}{row['median_ms']:>12}{row['p90_ms']:>10}")
    print(f"machine: {sys.platform}, load {Path('/proc/loadavg').read_text().split()[0]}")


if __name__ == "__main__":
    main()
