"""``LightningStoreServer``: serve a store over HTTP from inside a v0.3 program.

agentbolt's server (the same one ``agentbolt server`` runs) is started on the running
event loop by :meth:`LightningStoreServer.start`, so the in-process store keeps being used
from one loop. The object is itself a :class:`~agentbolt.compat.store.LightningStore`
over the served store. Clients: :class:`~agentbolt.compat.store_client.LightningStoreClient`,
``agentbolt.HttpStore`` or any ``agentbolt runner``.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable
from typing import Any

from agentbolt.compat.store import LightningStore, as_store
from agentbolt.store.base import Store

__all__ = ["LightningStoreServer", "UnauthenticatedServerWarning"]

log = logging.getLogger(__name__)


class UnauthenticatedServerWarning(UserWarning):
    """A store served beyond this machine without an admin token: anyone who can reach the
    port can read and change every rollout, resource and span."""


class LightningStoreServer(LightningStore):
    """Serve ``store`` at ``http://host:port``.

    As in v0.3, any ``host`` works — ``"0.0.0.0"`` serves every interface — but a store
    served beyond loopback without ``admin_token`` is open to anyone who can reach the port,
    so :meth:`start` then warns (:class:`UnauthenticatedServerWarning`, and the log). With
    ``admin_token`` every request must carry it (``LightningStoreClient(url, token=...)``,
    ``agentbolt runner --token``)."""

    def __init__(self, store: LightningStore | Store, host: str = "127.0.0.1", port: int = 4747,
                 *, admin_token: str | None = None, **_options: Any) -> None:
        super().__init__(as_store(store))
        self.host = host
        self.port = port
        self.admin_token = admin_token
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self.app_factory: Callable[[Store], Any] | None = None
        """Builds the ASGI app served (default: agentbolt's store API; the LLM proxy adds its gateway)."""

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def otlp_traces_endpoint(self) -> str:
        return f"{self.endpoint}/v1/traces"

    async def start(self) -> None:
        """Start serving on the running event loop; returns once the server accepts connections."""
        if self._task is not None:
            return
        import uvicorn

        from agentbolt.server.app import _is_loopback, create_app

        if self.admin_token is None and not _is_loopback(self.host):
            message = (f"serving the store on {self.host}:{self.port} WITHOUT authentication: anyone who can reach "
                       "this port can read and change every rollout, resource and span (and run code through "
                       "them in your agents). Pass admin_token=... (clients then need it), or bind 127.0.0.1")
            warnings.warn(message, UnauthenticatedServerWarning, stacklevel=2)
            log.warning(message)
        app = self.app_factory(self.store) if self.app_factory else create_app(self.store, admin_token=self.admin_token)
        config = uvicorn.Config(app, host=self.host, port=self.port, log_level="warning", access_log=False,
                                lifespan="on", timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(), name=f"agentbolt-store-server-{self.port}")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # the startup error
                raise RuntimeError(f"the store server did not start on {self.endpoint}")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        """Stop serving (the store itself stays open)."""
        if self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._task = None

    async def run_forever(self) -> None:
        await self.start()
        assert self._task is not None
        await self._task
