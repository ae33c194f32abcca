"""The oracle check (``agentbolt tasks check DIR``): is each task solvable and not already solved?

For each task, on the Docker executor, in the task's own environment with its verifier:

* the **oracle** — ``solution/solve.sh`` as the program (the ``solution/`` directory is
  the program's ``/workspace``; it runs from the environment's working directory) —
  must score 1;
* the **untouched** environment — a program that does nothing — must score 0.

Both run through the same path as training (a :class:`~agentbolt.tasks.harbor.run.HarborHarness`
claimed by a runner from an in-process store and server), with no model: the gateway
answers that there is none.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentbolt.engines.engine import Engine
from agentbolt.gateway import Gateway
from agentbolt.runner.harness.docker import DockerExecutor
from agentbolt.runner.harness.docker.client import docker_client
from agentbolt.runner.runner import Runner
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.tasks.harbor.run import docker_input, harbor_harness, ready
from agentbolt.tasks.harbor.task import HarborTask
from agentbolt.types import RolloutConfig, RolloutCreate, RolloutStatus

__all__ = ["TaskCheck", "check_tasks", "failures"]

ORACLE = ["sh", "-c", 'cd "$1" 2>/dev/null; exec sh /workspace/solve.sh', "oracle", "{workdir}"]
NOTHING = ["true"]


@dataclass
class TaskCheck:
    """One task's verdict: the oracle's and the untouched environment's rewards (``None``:
    the run failed, see ``problems``)."""

    task: str
    oracle: float | None = None
    untouched: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.oracle == 1.0 and self.untouched == 0.0


class _NoModel(Engine):
    """The check's gateway engine: the oracle and the empty program call no model."""

    name = "none"

    async def models(self) -> dict[str, Any]:
        return {"object": "list", "data": []}

    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        raise RuntimeError("agentbolt tasks check runs no model")

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        raise RuntimeError("agentbolt tasks check runs no model")

    def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        raise RuntimeError("agentbolt tasks check runs no model")

    def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        raise RuntimeError("agentbolt tasks check runs no model")


def check_tasks(tasks: Sequence[HarborTask], *, executor: DockerExecutor | None = None,
                concurrency: int = 2) -> list[TaskCheck]:
    """Run the oracle and the untouched check of every task (see the module docstring).
    Raises :class:`~agentbolt.runner.harness.docker.DockerUnavailableError` when no
    Docker Engine answers; a task that cannot be built or run is reported, not raised."""
    docker_client()  # no engine: one clear error, before anything else
    results = {t.name: TaskCheck(t.name) for t in tasks}
    runnable: list[HarborTask] = []
    for task in tasks:
        problem = None
        if task.solve_script is None:
            problem = "no solution/solve.sh: the oracle cannot run"
        else:
            try:
                ready([task], harbor_harness([task], NOTHING, executor=executor))
            except Exception as exc:  # noqa: BLE001 - an image missing or failing to build: this task's problem
                problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            runnable.append(task)
        else:
            results[task.name].problems.append(problem)
    if runnable:
        asyncio.run(_run_all(runnable, results, executor, concurrency))
    return list(results.values())


async def _run_all(tasks: Sequence[HarborTask], results: dict[str, TaskCheck], executor: DockerExecutor | None,
                   concurrency: int) -> None:
    admin = secrets.token_urlsafe(16)
    store = MemoryStore()
    with serve_in_thread(store, admin_token=admin, gateway=Gateway(_NoModel())) as url:
        for kind, command in (("oracle", ORACLE), ("untouched", NOTHING)):
            harness = harbor_harness(tasks, command, executor=executor, server_url=url, name=f"harbor-check:{kind}")
            inputs = [docker_input(t, workspace=t.solve_script.parent if kind == "oracle" and t.solve_script
                                   else None) for t in tasks]
            created = await store.enqueue_rollouts([RolloutCreate(input=i, config=RolloutConfig(max_attempts=1))
                                                    for i in inputs])
            runner = Runner(harness, store=store, concurrency=concurrency, heartbeat_interval=0.5, poll_interval=0.05)
            await runner.run(stop_when_idle=True)
            for task, made in zip(tasks, created, strict=True):
                rollout = await store.get_rollout(made.rollout_id)
                verdict = results[task.name]
                if rollout.status == RolloutStatus.SUCCEEDED and rollout.reward is not None:
                    setattr(verdict, kind, rollout.reward)
                    continue
                attempts = await store.query_attempts(made.rollout_id)
                error = attempts[-1].error if attempts else None
                why = f"{error.type}: {error.message}" if error else f"the rollout ended {rollout.status.value}"
                verdict.problems.append(f"the {kind} run failed: {why}")


def failures(checks: Sequence[TaskCheck]) -> list[str]:
    """One line per failed check, saying what is wrong."""
    lines = []
    for c in checks:
        lines += [f"{c.task}: {p}" for p in c.problems]
        if c.oracle is not None and c.oracle != 1.0:
            lines.append(f"{c.task}: the oracle (solution/solve.sh) scored {c.oracle}, not 1: the task is not "
                         "solvable as written, or its verifier is wrong")
        if c.untouched is not None and c.untouched != 0.0:
            lines.append(f"{c.task}: the untouched environment scored {c.untouched}, not 0: the verifier passes "
                         "without any work")
    return lines
