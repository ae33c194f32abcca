"""The SQLite backend: :class:`SqliteStore`, the embedded, durable default (one file, WAL).

``store`` is the class; ``engine`` the writer thread (group commit) and reader pool;
``schema`` the tables and migrations; ``reads``, ``writes``, ``metrics`` and ``retention``
the operations, in SQLite's SQL; ``rows`` loads rows and writes back what changed. What
SQLite shares with PostgreSQL lives in :mod:`agentbolt.store.sql`.
"""

from agentbolt.store.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
