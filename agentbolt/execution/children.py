"""Child processes of a trainer: the server and the runners.

Children are started with ``multiprocessing``'s *spawn* method (a fresh interpreter:
no inherited locks, threads or event loops), so the agent must be importable there: an
object defined at the top level of a module — the training script included, which
``multiprocessing`` imports again in the child (keep its work under
``if __name__ == "__main__":``) — or a ``"module:object"`` string.

Each child leaves the terminal's process group, so Ctrl-C reaches only the trainer,
which then stops the children in order (runners first, then the server); and each child
watches its parent, so a killed trainer leaves no orphans.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import sys
import time
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

import httpx

from agentbolt.execution.base import RunnerSpec

if TYPE_CHECKING:
    from agentbolt.gateway.spec import GatewaySpec

__all__ = ["ChildProcess", "start_server", "start_runner", "check_transferable", "free_port"]

log = logging.getLogger("agentbolt.trainer")

_SPAWN = multiprocessing.get_context("spawn")


class ChildProcess:
    """A spawned child with a name for messages, and a clean way to end it."""

    def __init__(self, label: str, process: BaseProcess) -> None:
        self.label = label
        self.process = process
        self.started_at = time.monotonic()
        self.stopping = False

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    @property
    def exitcode(self) -> int | None:
        return self.process.exitcode

    async def stop(self, *, signals: int = 1, timeout: float = 15.0) -> int | None:
        """Send SIGTERM ``signals`` times, wait up to ``timeout`` s, then SIGKILL."""
        self.stopping = True
        for i in range(signals):
            if not self.alive:
                break
            pid = self.pid
            if pid is None:  # never started
                break
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                break
            if i + 1 < signals:
                await asyncio.sleep(0.05)
        deadline = time.monotonic() + timeout
        while self.alive and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self.alive:
            log.warning("%s (pid %s) did not stop within %.0f s; killing it", self.label, self.pid, timeout)
            self.process.kill()
            await asyncio.to_thread(self.process.join, 5.0)
        else:
            self.process.join(0)
        return self.exitcode


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_transferable(spec: RunnerSpec) -> None:
    """Fail early, with advice, if the agent or hooks cannot reach a child process
    (or the agent is no agent at all: better said here than by every child)."""
    from agentbolt.runner.agent import as_agent

    as_agent(spec.agent)  # loads a "module:object" reference, checks the form
    main = sys.modules.get("__main__")
    for what, obj in (("agent", spec.agent), ("hooks", spec.hooks)):
        try:
            pickle.dumps(obj)
        except Exception as err:
            raise TypeError(
                f"the {what} cannot be sent to runner processes ({type(err).__name__}: {err}). Define it at the "
                "top level of a module (not a lambda or a closure), or pass it as a 'module:object' string; "
                "objects holding open clients must create them inside the agent. Or use strategy='inprocess'."
            ) from err
        if _defined_in_main(obj) and not getattr(main, "__file__", None):  # third-party: the user's objects, __main__
            raise TypeError(
                f"the {what} is defined in an interactive session (__main__ has no file), so runner processes "
                "cannot import it: move it into a module, or use strategy='inprocess'"
            )


def _defined_in_main(obj: Any) -> bool:
    items = obj if isinstance(obj, (list, tuple)) else [obj]
    modules = [getattr(o, "__module__", None) for o in items]  # third-party: the user's objects, any kind
    return "__main__" in modules or any(type(o).__module__ == "__main__" for o in items)


# --------------------------------------------------------------------------- server
def start_server(
    store_url: str,
    *,
    host: str,
    port: int,
    admin_token: str | None,
    log_level: str,
    gateway: GatewaySpec | None = None,
) -> ChildProcess:
    """Start ``agentbolt server`` in a child; ``gateway`` is built there (a local model
    loads in the server process, not in the trainer)."""
    process = _SPAWN.Process(
        target=_server_main,
        args=(store_url, host, port, admin_token, log_level, os.getpid(), gateway),
        name="agentbolt-server",
        daemon=False,
    )
    process.start()
    return ChildProcess("the agentbolt server", process)


async def wait_until_serving(child: ChildProcess, url: str, timeout: float = 60.0) -> None:
    """Wait until the server at ``url`` answers ``/healthz`` (or fail if it died)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if not child.alive:
                raise RuntimeError(
                    f"{child.label} exited with code {child.exitcode} before serving (see its messages above)"
                )
            try:
                if (await client.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{child.label} did not answer at {url} within {timeout:.0f} s")
            await asyncio.sleep(0.05)


def _server_main(
    store_url: str,
    host: str,
    port: int,
    admin_token: str | None,
    log_level: str,
    parent: int,
    gateway: GatewaySpec | None = None,
) -> None:
    os.setpgrp()
    from agentbolt.runner.process import watch_parent
    from agentbolt.server import run_server

    watch_parent(parent)
    run_server(store_url=store_url, host=host, port=port, admin_token=admin_token, log_level=log_level, gateway=gateway)


# --------------------------------------------------------------------------- runners
def start_runner(
    url: str, token: str | None, spec: RunnerSpec, worker_id: str, *, log_level: str, label: str
) -> ChildProcess:
    process = _SPAWN.Process(
        target=_runner_main,
        args=(url, token, spec, worker_id, log_level, os.getpid()),
        name=f"agentbolt-{worker_id}",
        daemon=False,
    )
    process.start()
    return ChildProcess(label, process)


def _runner_main(url: str, token: str | None, spec: RunnerSpec, worker_id: str, log_level: str, parent: int) -> None:
    os.setpgrp()
    from agentbolt.runner.process import configure_child_logging, serve_runner
    from agentbolt.store.url import open_store

    configure_child_logging(log_level)
    store = open_store(url, token=token)
    serve_runner(spec.build(store, worker_id=worker_id), parent_pid=parent)
