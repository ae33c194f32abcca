"""Turn failures into one-line CLI messages and exit codes, never tracebacks.

Exit codes follow the usual convention: ``2`` for a mistake in what the user asked
(unknown id, bad URL, bad cursor, missing token), ``1`` for a runtime failure (the store
could not be reached, the server failed). Set ``AGENTBOLT_DEBUG=1`` to get the
traceback of an unexpected error instead of its one-line summary.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import httpx
import typer

from agentbolt.store.errors import StoreError, StoreUnavailableError

__all__ = ["RUNTIME_ERROR", "USAGE_ERROR", "CliFailure", "fail", "reported_errors"]

USAGE_ERROR = 2
"""Exit code for a request that cannot be served as asked."""
RUNTIME_ERROR = 1
"""Exit code for a failure while doing what was asked."""


class CliFailure(Exception):
    """A failure the CLI has already phrased for the user."""

    def __init__(self, message: str, exit_code: int = USAGE_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def fail(message: str, exit_code: int = USAGE_ERROR) -> NoReturn:
    """Print ``Error: message`` on stderr and leave with ``exit_code``."""
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    typer.secho(f"Error: {one_line}", err=True, fg=typer.colors.RED)
    raise typer.Exit(exit_code)


def _store_error_exit_code(err: StoreError) -> int:
    if isinstance(err, StoreUnavailableError) or err.status_code >= 500:
        return RUNTIME_ERROR
    return USAGE_ERROR


@contextmanager
def reported_errors() -> Iterator[None]:
    """Run a command body, translating known failures into :func:`fail`."""
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except CliFailure as err:
        fail(err.message, err.exit_code)
    except StoreError as err:
        hint = ""
        # A 401/403 comes back from HttpStore as a 4xx InvalidRequestError; the server's
        # message names the token, which is how it is recognised here.
        if err.status_code in (401, 403) or (400 <= err.status_code < 500 and "token" in err.message.lower()):
            hint = " (the CLI sends --token, or AGENTBOLT_TOKEN, as the bearer token)"
        fail(f"{err.message}{hint}", _store_error_exit_code(err))
    except httpx.TransportError as err:
        where = f" at {err.request.url}" if _has_request(err) else ""
        fail(f"cannot reach the agentbolt server{where}: {err or type(err).__name__}", RUNTIME_ERROR)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as err:
        if os.environ.get("AGENTBOLT_DEBUG"):
            raise
        fail(
            f"unexpected {type(err).__name__}: {err} (set AGENTBOLT_DEBUG=1 to see the traceback)",
            RUNTIME_ERROR,
        )


def _has_request(err: httpx.TransportError) -> bool:
    try:
        err.request  # noqa: B018 - raises RuntimeError when the error has no request
    except RuntimeError:
        return False
    return True
