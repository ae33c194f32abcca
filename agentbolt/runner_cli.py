"""``agentbolt runner``: join a server and run an agent on its rollouts, from any
machine that can reach it::

    agentbolt runner --server http://trainer-host:4747 --token $TOKEN \\
        --agent my_project.agents:solve --concurrency 8

Also runnable as ``python -m agentbolt.runner_cli ...``. Ctrl-C (or SIGTERM) once:
finish running rollouts and leave; twice: stop them now (they are retried elsewhere).
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Annotated

import typer

__all__ = ["runner", "main"]


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def runner(
    server: Annotated[
        str,
        typer.Option(
            "--server",
            envvar="AGENTBOLT_SERVER",
            help="The agentbolt server to join (http://host:port), or a store URL (sqlite:///path.db).",
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
        typer.Option("--worker-id", help="Name of this runner in the store (default: host, pid, random).", show_default=False),
    ] = None,
    hooks: Annotated[
        list[str] | None,
        typer.Option("--hooks", help="Hooks object as module:object (repeatable).", show_default=False),
    ] = None,
    heartbeat_interval: Annotated[float, typer.Option("--heartbeat-interval", min=0.01, help="Seconds between heartbeats.")] = 2.0,
    poll_interval: Annotated[float, typer.Option("--poll-interval", min=0.01, help="Seconds between claims when idle.")] = 0.2,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Log level.")] = LogLevel.INFO,
) -> None:
    """Join an agentbolt server and run an agent on its queued rollouts."""
    from agentbolt.cli.failures import USAGE_ERROR, fail, reported_errors
    from agentbolt.runner.agent import as_agent
    from agentbolt.runner.loading import AgentLoadError, load_object
    from agentbolt.runner.process import configure_child_logging, serve_runner
    from agentbolt.runner.runner import Runner
    from agentbolt.store.url import open_store

    configure_child_logging(log_level.value)
    with reported_errors():
        try:
            agent_obj = as_agent(agent)
            hook_objs = [_instantiate(load_object(ref)) for ref in hooks or []]
        except (AgentLoadError, TypeError, ImportError) as err:
            fail(f"cannot load --agent {agent}: {err}", USAGE_ERROR)
        store = open_store(server, token=token)
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
            "runner %s starting: server %s, agent %s, concurrency %d", the_runner.worker_id, server, agent_obj.name, concurrency
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


def _instantiate(obj: object) -> object:
    return obj() if isinstance(obj, type) else obj


def main() -> None:
    """``python -m agentbolt.runner_cli``."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(runner)
    app(prog_name="agentbolt runner")


if __name__ == "__main__":
    main()
