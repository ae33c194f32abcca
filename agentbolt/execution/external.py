"""External execution: the trainer runs the algorithm (and, unless given a server,
starts one); runners are started by you, anywhere, with::

    agentbolt runner --server http://HOST:PORT --token TOKEN --agent package.module:agent --concurrency 8

The trainer prints that command line when it starts. Runners may join and leave at any
time; rollouts of a runner that disappears are retried once the store sees it silent
(``unresponsive_seconds`` of the rollout config).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console

from agentbolt.execution.base import (
    AlgorithmMain,
    ExecutionStrategy,
    RunnersFailedError,
    RunnerSpec,
    process_gateway,
    run_supervised,
    server_gateway,
)
from agentbolt.execution.server import ServerHandle, open_server, public_url
from agentbolt.runner.agent import LitAgent
from agentbolt.runner.loading import reference_of
from agentbolt.store.base import Store

if TYPE_CHECKING:
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import GatewaySpec

__all__ = ["ExternalStrategy", "runner_command"]

log = logging.getLogger("agentbolt.trainer")

T = TypeVar("T")


def runner_command(url: str, token: str | None, agent: Any, concurrency: int) -> str:
    """The ``agentbolt runner`` command line that joins this run."""
    if isinstance(agent, LitAgent):
        agent = type(agent)  # runners instantiate a LitAgent class themselves
    ref = agent if isinstance(agent, str) else reference_of(agent)
    if ref is None and getattr(agent, "__module__", None) == "__main__":  # third-party: the user's agent, __main__
        main_file = getattr(sys.modules.get("__main__"), "__file__", None)  # third-party: the user's agent, __main__
        name = getattr(agent, "__qualname__", None)  # third-party: the user's agent and __main__ module
        if main_file and name and "<" not in name:
            ref = f"{Path(main_file).name}:{name}"
    parts = ["agentbolt runner", f"--server {url}"]
    if token:
        parts.append(f"--token {token}")
    parts.append(f"--agent {ref or 'MODULE:OBJECT'}")
    parts.append(f"--concurrency {concurrency}")
    return " ".join(parts)


class ExternalStrategy(ExecutionStrategy):
    """Serve the store for runners started elsewhere (``agentbolt runner``).

    Without a store, a server is started on ``host:port`` over a SQLite store in
    ``run_dir``; a non-loopback ``host`` needs ``admin_token`` (one is generated if
    left out, and printed in the join command). With ``store="http://..."`` or an
    HttpStore, that server is used as is.
    """

    name = "external"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 4747,
        admin_token: str | None = None,
        run_dir: str | Path | None = None,
        announce: bool = True,
        console: Console | None = None,
        log_level: str = "warning",
    ) -> None:
        self.host = host
        self.port = port
        self.admin_token = admin_token
        self.run_dir = run_dir
        self.announce = announce
        self.console = console
        self.log_level = log_level
        self.server: ServerHandle | None = None

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

        spec = process_gateway(gateway, self.name)
        if isinstance(store, Store) and not isinstance(store, HttpStore):
            if spec is not None:
                raise ValueError(
                    f"a {type(store).__name__} object is used as is, with no server to put the gateway in: pass "
                    "store=None or 'sqlite:///path.db' (the trainer serves it, gateway included)"
                )
            algo_store, server = store, None
        else:
            server = self.server = await open_server(
                store,
                run_dir=self.run_dir,
                host=self.host,
                port=self.port,
                admin_token=self.admin_token,
                log_level=self.log_level,
                gateway=spec,
            )
            algo_store = HttpStore(server.url, token=server.token)
        control = server_gateway(algo_store)  # the server's gateway (if it has one), for the algorithm
        try:
            await algo_store.start()
            if self.announce and server is not None:
                command = runner_command(
                    public_url(server, self.host), server.token, runners.agent, runners.concurrency
                )
                (self.console or Console(stderr=True)).print(
                    f"[bold]Waiting for runners.[/bold] Start {n_runners} or more with:\n  {command}", soft_wrap=True
                )
            return await run_supervised(main(algo_store, control), self._watch(server))
        finally:
            if control is not None:
                await control.aclose()
            if server is not None:
                await algo_store.close()
                await server.stop()

    async def _watch(self, server: ServerHandle | None) -> None:
        while True:
            await asyncio.sleep(0.5)
            if server is not None and server.process is not None and not server.process.alive:
                raise RunnersFailedError(f"the agentbolt server process exited with code {server.process.exitcode}")
