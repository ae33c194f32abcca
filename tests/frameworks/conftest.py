"""The frameworks' tests use the gateway tests' server fixture (``world``)."""

from gateway.conftest import config, engine, world  # noqa: F401 - fixtures, overridden per module where needed
