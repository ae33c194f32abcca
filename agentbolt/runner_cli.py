"""``python -m agentbolt.runner_cli``: the ``agentbolt runner`` command on its own (how
the trainer starts runner processes and how docs/trainer.md shows it). The command is
:mod:`agentbolt.cli.runner_cmd`."""

from agentbolt.cli.runner_cmd import _server_pool, main, runner

__all__ = ["_server_pool", "main", "runner"]

if __name__ == "__main__":
    main()
