"""``agentbolt runner``: join a server and run an agent on its rollouts, from any
machine that can reach it::

    agentbolt runner --server http://trainer-host:4747 --token $TOKEN \\
        --agent my_project.agents:solve --concurrency 8

Several servers on one PostgreSQL database: repeat ``--server``. Each runner process
starts on one of them — picked from its worker id, so many runners spread over the
servers — and fails over to the next when its server cannot be reached (see
``docs/scale-out.md``).

Also runnable as ``python -m agentbolt.runner_cli ...`` (:mod:`agentbolt.runner_cli`
keeps that entry point). Ctrl-C (or SIGTERM) once:
finish running rollouts and leave; twice: stop them now (they are retried elsewhere).
"""

from __future__ import annotations

import logging
import zlib
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from agentbolt.cli.failures import USAGE_ERROR, fail, reported_errors

if TYPE_CHECKING:
    from agentbolt.store.base import Store

__all__ = ["LogLevel", "main", "runner"]


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def runner(
    server: Annotated[
        list[str],
        typer.Option(
            "--server",
            envvar="AGENTBOLT_SERVER",
            help="The agentbolt server to join (http://host:port), or a store URL (sqlite:///path.db). "
            "Repeat for several servers on one shared database: the runner uses one and fails over to the next.",
        ),
    ],
    agent: Annotated[
        str,
        typer.Option(
            "--agent",
            help="The agent, as module:object (or path/to/file.py:object); the current directory is importable.",
        ),
    ],
    token: Annotated[
        str | None,
        typer.Option("--token", envvar="AGENTBOLT_TOKEN", help="Admin token of the server.", show_default=False),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Rollouts run at once.")] = 4,
    max_rollouts: Annotated[
        int | None,
        typer.Option("--max-rollouts", min=1, help="Leave after running this many rollouts.", show_default=False),
    ] = None,
    worker_id: Annotated[
        str | None,
        typer.Option(
            "--worker-id", help="Name of this runner in the store (default: host, pid, random).", show_default=False
        ),
    ] = None,
    hooks: Annotated[
        list[str] | None,
        typer.Option("--hooks", help="Hooks object as module:object (repeatable).", show_default=False),
    ] = None,
    heartbeat_interval: Annotated[
        float, typer.Option("--heartbeat-interval", min=0.01, help="Seconds between heartbeats.")
    ] = 2.0,
    poll_interval: Annotated[
        float, typer.Option("--poll-interval", min=0.01, help="Seconds between claims when idle.")
    ] = 0.2,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Log level.")] = LogLevel.INFO,
) -> None:
    """Join an agentbolt server and run an agent on its queued rollouts."""
    from agentbolt.runner.agent import as_agent
    from agentbolt.runner.job import default_worker_id
    from agentbolt.runner.loading import AgentLoadError, load_object
    from agentbolt.runner.process import configure_child_logging, serve_runner
    from agentbolt.runner.runner import Runner
    from agentbolt.store.capabilities import ServerBacked
    from agentbolt.store.url import open_store

    configure_child_logging(log_level.value)
    with reported_errors():
        try:
            agent_obj = as_agent(agent)
            hook_objs = [_instantiate(load_object(ref)) for ref in hooks or []]
        except (AgentLoadError, TypeError, ImportError) as err:
            fail(f"cannot load --agent {agent}: {err}", USAGE_ERROR)
        worker_id = worker_id or default_worker_id()
        if len(server) == 1:
            store = open_store(server[0], token=token)
        else:
            store = _server_pool(server, token, worker_id)
        the_runner = Runner(
            agent_obj,
            store=store,
            concurrency=concurrency,
            worker_id=worker_id,
            hooks=hook_objs,
            heartbeat_interval=heartbeat_interval,
            poll_interval=poll_interval,
        )
        logging.getLogger("agentbolt.runner").info(
            "runner %s starting: server %s, agent %s, concurrency %d",
            the_runner.worker_id,
            store.base_url if isinstance(store, ServerBacked) else server[0],
            agent_obj.name,
            concurrency,
        )
        stats = serve_runner(the_runner, max_rollouts=max_rollouts)
        if stats is None:
            typer.echo("runner stopped; its running rollouts were handed back", err=True)
            raise typer.Exit(130)
        typer.echo(
            f"runner {stats.worker_id}: {stats.claimed} claimed, {stats.succeeded} succeeded, {stats.failed} failed, "
            f"{stats.stopped} stopped in {stats.elapsed:.1f} s",
            err=True,
        )


def _server_pool(servers: list[str], token: str | None, worker_id: str) -> Store:
    """One client over several servers, starting at the one this worker's id picks (so
    runners spread evenly) and failing over in order."""
    from agentbolt.store.http import HttpStore

    not_http = [url for url in servers if not url.startswith(("http://", "https://"))]
    if not_http:
        fail(f"several --server must all be agentbolt servers (http://host:port), not {', '.join(not_http)}",
             USAGE_ERROR)
    first = zlib.crc32(worker_id.encode()) % len(servers)
    return HttpStore(servers[first:] + servers[:first], token=token)


def _instantiate(obj: object) -> object:
    return obj() if isinstance(obj, type) else obj


def main() -> None:
    """``python -m agentbolt.runner_cli``: the ``runner`` command alone."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(runner)
    app(prog_name="agentbolt runner")
