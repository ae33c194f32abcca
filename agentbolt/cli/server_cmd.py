"""``agentbolt server``: serve a store over HTTP (store API, OTLP, metrics)."""

from enum import StrEnum
from typing import Annotated

import typer

from agentbolt.cli.connect import DEFAULT_STORE_URL
from agentbolt.cli.failures import RUNTIME_ERROR, USAGE_ERROR, fail

__all__ = ["server"]


class LogLevel(StrEnum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    DEBUG = "debug"


def server(
    store: Annotated[
        str, typer.Option("--store", help="Store to serve: sqlite:///path.db (durable) or memory:// (lost on exit).")
    ] = DEFAULT_STORE_URL,
    host: Annotated[
        str, typer.Option("--host", help="Interface to bind. Anything but loopback needs --admin-token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="TCP port.")] = 4747,
    admin_token: Annotated[
        str | None,
        typer.Option(
            "--admin-token",
            envvar="AGENTBOLT_ADMIN_TOKEN",
            help="Token that grants full access to the store API.",
            show_default=False,
        ),
    ] = None,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", min=0.001, help="Largest request body accepted, in MiB.")
    ] = 16.0,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Server log level.")] = LogLevel.INFO,
) -> None:
    """Serve a store over HTTP until interrupted (Ctrl-C)."""
    try:
        from agentbolt.server import run_server
    except ImportError as err:
        fail(f"the server is not available in this installation: {err}", RUNTIME_ERROR)
    try:
        run_server(
            store_url=store,
            host=host,
            port=port,
            admin_token=admin_token,
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            log_level=log_level.value,
        )
    except KeyboardInterrupt:
        return
    except ValueError as err:  # includes InvalidRequestError: a setting that cannot work
        fail(str(err), USAGE_ERROR)
    except OSError as err:
        fail(f"cannot serve on {host}:{port}: {err.strerror or err}", RUNTIME_ERROR)
    except SystemExit as exit_:  # uvicorn exits (code 3) when startup fails, e.g. a taken port
        if exit_.code not in (0, None):
            fail(
                f"the server on {host}:{port} could not start or stopped with an error: see its log above",
                RUNTIME_ERROR,
            )
