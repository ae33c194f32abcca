"""The ``agentbolt`` command line: run the server, inspect a store.

``app`` is the Typer application (the ``agentbolt`` console script and
``python -m agentbolt`` both run it).
"""

import platform

import typer

from agentbolt.cli.migrate_cmd import migrate
from agentbolt.cli.runner_cmd import runner
from agentbolt.cli.sandbox_cmd import sandbox_app
from agentbolt.cli.server_cmd import server
from agentbolt.cli.store_cmds import store_app
from agentbolt.cli.tasks_cmd import tasks_app

__all__ = ["app"]

app = typer.Typer(
    name="agentbolt",
    help="Train existing AI agents with RL, prompt optimisation and fine-tuning.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command(name="server")(server)
app.command(name="runner")(runner)
app.add_typer(store_app, name="store")
app.command(name="migrate")(migrate)
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(tasks_app, name="tasks")


@app.command()
def version() -> None:
    """Print the agentbolt version."""
    from agentbolt import __version__

    typer.echo(f"agentbolt {__version__} (Python {platform.python_version()})")
