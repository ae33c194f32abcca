"""The PostgreSQL backend: :class:`PostgresStore`, one database shared by many servers.

``store`` is the class; ``settings`` parses its URL; ``engine``, ``group`` and ``tx`` the
connection pool, the listener and group commit; ``schema`` the tables and migrations;
``reads``, ``writes``, ``claims``, ``metrics`` and ``retention`` the operations, in
PostgreSQL's SQL; ``rows`` loads rows and writes back what changed. What PostgreSQL shares
with SQLite lives in :mod:`agentbolt.store.sql`. Needs ``pip install 'agentbolt[postgres]'``.
"""

from agentbolt.store.postgres.store import (
    PostgresSettings,
    PostgresStore,
    parse_postgres_url,
)

__all__ = ["PostgresSettings", "PostgresStore", "parse_postgres_url"]
