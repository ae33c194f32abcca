"""Run a real server in a background thread, for tests and notebooks."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from starlette.types import ASGIApp

from agentbolt.server.app import create_app
from agentbolt.store.base import Store

__all__ = ["serve_in_thread", "serve_app_in_thread"]


@contextlib.contextmanager
def serve_in_thread(store: Store, *, admin_token: str | None = None, **app_kwargs: Any) -> Iterator[str]:
    """Serve ``store`` with uvicorn on a free ``127.0.0.1`` port in a daemon thread.

    Yields the base URL (``http://127.0.0.1:PORT``) once the server accepts connections;
    shuts it down (and closes the store, through the app's lifespan) on exit.
    ``app_kwargs`` go to :func:`~agentbolt.server.app.create_app`.
    """
    with serve_app_in_thread(create_app(store, admin_token=admin_token, **app_kwargs)) as url:
        yield url


@contextlib.contextmanager
def serve_app_in_thread(app: ASGIApp, *, port: int = 0, startup_timeout: float = 30.0) -> Iterator[str]:
    """Serve any ASGI app (e.g. the agentbolt app wrapped in test middleware) like
    :func:`serve_in_thread`; ``port=0`` picks a free one."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="auto", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"agentbolt-server-{port}", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the server thread exited during startup; its error is in the log above")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not start within {startup_timeout} s")
            time.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
