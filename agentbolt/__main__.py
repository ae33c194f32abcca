"""``python -m agentbolt``: the same CLI as the ``agentbolt`` command."""

from agentbolt.cli import app

if __name__ == "__main__":
    app(prog_name="agentbolt")
