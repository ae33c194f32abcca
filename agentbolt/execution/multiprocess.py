"""Multi-process execution: the trainer starts ``agentbolt server`` on a SQLite store
and ``n_runners`` runner processes that connect to it over HTTP; the algorithm talks to
the same server.

A runner process that dies (crash, OOM kill, SIGKILL) is reported with its exit code,
its attempts are marked unresponsive at once (so the store retries their rollouts), and
it is started again (up to ``max_restarts`` times per slot). If every runner is gone
for good, or the server dies, ``fit`` fails instead of waiting forever.

The agent must be importable in a fresh process (see :mod:`agentbolt.execution.children`):
lambdas and closures need the in-process strategy.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agentbolt.execution.base import (
    AlgorithmMain,
    ExecutionStrategy,
    RunnersFailedError,
    RunnerSpec,
    process_gateway,
    run_supervised,
    server_gateway,
)
from agentbolt.execution.children import ChildProcess, check_transferable, start_runner
from agentbolt.execution.recovery import release_attempts_of
from agentbolt.execution.server import ServerHandle, open_server
from agentbolt.store.base import Store

if TYPE_CHECKING:
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import GatewaySpec

__all__ = ["MultiProcessStrategy"]

log = logging.getLogger("agentbolt.trainer")

T = TypeVar("T")


@dataclass
class _Slot:
    index: int
    child: ChildProcess
    worker_id: str
    restarts: int = 0
    dead: bool = False


class MultiProcessStrategy(ExecutionStrategy):
    """Runner processes plus a server process.

    * ``run_dir`` — where the SQLite store goes when no store is given (default
      ``./runs/<date-time>-<id>``).
    * ``restart`` / ``max_restarts`` — start a crashed runner again, at most this many
      times per runner.
    * ``log_level`` — of the child processes (they write to this process's stderr).
    """

    name = "multiprocess"

    def __init__(
        self,
        *,
        run_dir: str | Path | None = None,
        restart: bool = True,
        max_restarts: int = 3,
        log_level: str = "warning",
        check_interval: float = 0.2,
    ) -> None:
        self.run_dir = run_dir
        self.restart = restart
        self.max_restarts = max_restarts
        self.log_level = log_level
        self.check_interval = check_interval
        self.server: ServerHandle | None = None
        self.slots: list[_Slot] = []

    async def execute(
        self,
        main: AlgorithmMain[T],
        runners: RunnerSpec,
        *,
        n_runners: int,
        store: Store | str | None,
        gateway: GatewaySpec | Gateway | None = None,
    ) -> T:
        from agentbolt.store.http import HttpStore

        check_transferable(runners)
        spec = process_gateway(gateway, self.name)
        self.server = server = await open_server(store, run_dir=self.run_dir, log_level=self.log_level, gateway=spec)
        algo_store = HttpStore(server.url, token=server.token)
        control = server_gateway(algo_store)  # the server's gateway (if it has one), for the algorithm
        interrupted = False
        try:
            await algo_store.start()
            self.slots = [self._start(i, runners) for i in range(n_runners)]
            log.info(
                "started %d runner processes (pids %s)", n_runners, ", ".join(str(s.child.pid) for s in self.slots)
            )
            return await run_supervised(main(algo_store, control), self._watch(algo_store, runners))
        except asyncio.CancelledError:
            interrupted = True
            raise
        finally:
            log.info("stopping %d runner processes%s", len(self.slots), " now (interrupted)" if interrupted else "")
            await self._stop_runners(hard=interrupted, grace=runners.shutdown_grace)
            if control is not None:
                await control.aclose()
            await algo_store.close()
            await server.stop()
            log.info("runner processes and server stopped")

    def _start(self, index: int, spec: RunnerSpec, restarts: int = 0) -> _Slot:
        assert self.server is not None
        worker_id = f"proc-{os.getpid()}-{index}" + (f"-r{restarts}" if restarts else "")
        child = start_runner(
            self.server.url,
            self.server.token,
            spec,
            worker_id,
            log_level=self.log_level,
            label=f"runner process {index}",
        )
        return _Slot(index, child, worker_id, restarts)

    async def _watch(self, store: Store, spec: RunnerSpec) -> None:
        assert self.server is not None
        while True:
            await asyncio.sleep(self.check_interval)
            server = self.server.process
            if server is not None and not server.alive:
                raise RunnersFailedError(f"the agentbolt server process exited with code {server.exitcode}")
            for i, slot in enumerate(self.slots):
                if slot.dead or slot.child.alive or slot.child.stopping:
                    continue
                await self._crashed(store, slot)
                if self.restart and slot.restarts < self.max_restarts:
                    self.slots[i] = self._start(slot.index, spec, slot.restarts + 1)
                    log.warning("restarted runner process %d (pid %s)", slot.index, self.slots[i].child.pid)
                else:
                    slot.dead = True
            if all(slot.dead for slot in self.slots):
                raise RunnersFailedError(
                    "every runner process has exited and none is restarted any more; see their messages above"
                )

    async def _crashed(self, store: Store, slot: _Slot) -> None:
        code = slot.child.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        log.warning("runner process %d (pid %s, worker %s) %s", slot.index, slot.child.pid, slot.worker_id, how)
        try:
            n = await release_attempts_of(store, slot.worker_id, f"runner process {slot.child.pid} {how}")
        except Exception as exc:  # noqa: BLE001 — the store expires them later anyway
            log.warning("could not requeue the rollouts of worker %s (%s); the store will once they go unresponsive",
                        slot.worker_id, exc)
            return
        if n:
            log.warning("%d rollout(s) of that runner will be retried", n)

    async def _stop_runners(self, *, hard: bool, grace: float) -> None:
        children = [slot.child for slot in self.slots if slot.child.alive]
        await asyncio.gather(
            *(child.stop(signals=2 if hard else 1, timeout=(10.0 if hard else grace + 10.0)) for child in children)
        )
