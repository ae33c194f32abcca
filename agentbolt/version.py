"""agentbolt's version, in a module of its own so that any layer can report it (the
server's health route, an export's manifest) without importing the package root, which
imports the whole library."""

__version__ = "0.1.0"
