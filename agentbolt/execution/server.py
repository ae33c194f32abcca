"""The server that runner processes connect to: an existing one, or one the trainer
starts on a SQLite file (by default in a fresh run directory)."""

from __future__ import annotations

import logging
import secrets
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentbolt.execution.children import (
    ChildProcess,
    free_port,
    start_server,
    wait_until_serving,
)
from agentbolt.store.base import Store

if TYPE_CHECKING:
    from agentbolt.gateway.spec import GatewaySpec

__all__ = ["ServerHandle", "default_run_dir", "open_server"]

log = logging.getLogger("agentbolt.trainer")


def default_run_dir() -> Path:
    """``./runs/<date-time>-<id>``: where a run's SQLite store is kept."""
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


@dataclass
class ServerHandle:
    """Where the server is (``url``, ``token``) and, if the trainer started it, its process."""

    url: str
    token: str | None
    process: ChildProcess | None = None
    store_url: str | None = None

    async def stop(self, timeout: float = 15.0) -> None:
        if self.process is not None and self.process.alive:
            await self.process.stop(timeout=timeout)


async def open_server(
    store: Store | str | None,
    *,
    run_dir: str | Path | None,
    host: str = "127.0.0.1",
    port: int | None = None,
    admin_token: str | None = None,
    log_level: str = "warning",
    gateway: GatewaySpec | None = None,
) -> ServerHandle:
    """Connect to the server ``store`` names (an ``http://`` URL or an HttpStore), or
    start one serving the SQLite store it names — or a new one in ``run_dir`` — with
    ``gateway`` mounted when given."""
    from agentbolt.store.http import HttpStore
    from agentbolt.store.memory import MemoryStore

    if isinstance(store, HttpStore) or (isinstance(store, str) and store.startswith(("http://", "https://"))):
        url = store.base_url if isinstance(store, HttpStore) else store.rstrip("/")
        if gateway is not None:
            raise ValueError(
                f"the store is the running server at {url}, so the trainer starts no server to put the gateway in: "
                "start that server with the engine (`agentbolt server --engine ...`) and leave gateway= out, or "
                "let the trainer start the server (store=None or 'sqlite:///path.db')"
            )
        return ServerHandle(url, (store.token if isinstance(store, HttpStore) else None) or admin_token)
    if isinstance(store, MemoryStore) or store in ("memory", "memory:", "memory://"):
        raise TypeError(
            "a MemoryStore lives inside one process, so runner processes cannot share it: leave store=None "
            "(a SQLite store in the run directory), pass 'sqlite:///path.db' or an HttpStore, or use "
            "strategy='inprocess'"
        )
    store_url = _sqlite_url(store, run_dir)
    port = port or free_port()
    token = admin_token or secrets.token_urlsafe(24)
    child = start_server(store_url, host=host, port=port, admin_token=token, log_level=log_level, gateway=gateway)
    connect_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    url = f"http://{connect_host}:{port}"
    # a local model loads (and SmolLM2 is converted, the first time) before the server listens
    startup = 600.0 if gateway is not None and gateway.engine.kind == "transformers" else 60.0
    try:
        await wait_until_serving(child, url, timeout=startup)
    except BaseException:
        await child.stop(timeout=5.0)
        raise
    log.info("agentbolt server on %s (store %s, pid %s)%s", url, store_url, child.pid,
             f" with the gateway to the {gateway.engine.describe()}" if gateway is not None else "")
    return ServerHandle(url, token, child, store_url)


def _sqlite_url(store: Store | str | None, run_dir: str | Path | None) -> str:
    if store is None:
        directory = Path(run_dir) if run_dir is not None else default_run_dir()
        directory.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{directory.resolve() / 'store.db'}"
    if isinstance(store, str):
        if store.startswith("sqlite:///"):
            return store
        if store.endswith((".db", ".sqlite", ".sqlite3")):
            return f"sqlite:///{Path(store).resolve()}"
        raise ValueError(f"cannot serve store {store!r} to runner processes: use sqlite:///path.db or http://host:port")
    from agentbolt.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return f"sqlite:///{store.path.resolve()}"
    raise TypeError(
        f"cannot share a {type(store).__name__} with runner processes: pass 'sqlite:///path.db', an HttpStore "
        "or nothing (a SQLite store in the run directory)"
    )


def public_url(handle: ServerHandle, host: str) -> str:
    """The URL to give runners on other machines (the host name instead of 0.0.0.0)."""
    if host in ("0.0.0.0", "::", "") and handle.process is not None:
        return handle.url.replace("127.0.0.1", socket.gethostname(), 1)
    return handle.url
