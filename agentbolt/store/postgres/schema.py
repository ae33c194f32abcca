"""The PostgreSQL schema of :class:`~agentbolt.store.postgres.PostgresStore` and its
versioned migrations.

Every applied step is a row of ``agentbolt_migrations`` (version, description, time).
:data:`MIGRATIONS` is an ordered list; opening a store applies the steps the schema has
not seen yet, in one transaction holding an advisory lock, so that several servers
starting at once against one database migrate it exactly once. All missing steps go to
the server as one multi-statement string: a fresh schema costs one round trip. Never edit
a released step: append a new one.

Layout notes: rollout inputs, configs and metadata are JSON *text* (key order kept, the
text a search looks in, like SQLite); spans are JSONB (``data``). PostgreSQL's JSONB
cannot hold the NUL character, so the rare span containing one is kept intact as JSON
text in ``raw`` instead.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from agentbolt.store.errors import InvalidRequestError, StoreError

__all__ = [
    "FOLD",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Migration",
    "SchemaVersionError",
    "check_schema_name",
    "load_secret",
    "migrate",
]

FOLD = "translate({}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
"""SQL folding ASCII letters only, like :func:`agentbolt.store.search.fold` (``lower()``
would also fold non-ASCII letters and disagree with the other backends)."""

SEARCH_TEXT = FOLD.format("rollout_id || ' ' || input")
"""The text the trigram index covers: a superset prefilter of a search (see reads)."""


class SchemaVersionError(StoreError):
    """The database was migrated by a newer agentbolt than this one."""

    status_code = 500
    code = "schema_version"


@dataclass(frozen=True)
class Migration:
    """One schema step: what it does, and the SQL (several statements) that does it."""

    description: str
    sql: str


MIGRATIONS: list[Migration] = [
    Migration(
        "initial schema: rollouts, attempts, spans, resources, workers, metrics, meta",
        """
        CREATE TABLE meta (key text PRIMARY KEY, value bytea NOT NULL);
        -- seq is the enqueue order: FIFO claims and created_at ties
        CREATE TABLE rollouts (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            rollout_id text NOT NULL UNIQUE,
            status text NOT NULL,
            mode text NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            start_time double precision,
            end_time double precision,
            attempt_count integer NOT NULL DEFAULT 0,
            latest_attempt_id text,
            reward double precision,
            resources_version integer,
            input text NOT NULL,
            config text NOT NULL,
            metadata text NOT NULL
        );
        -- the claim queue: small, and what FOR UPDATE SKIP LOCKED walks
        CREATE INDEX rollouts_queue ON rollouts (seq) WHERE status IN ('queuing', 'requeuing');
        -- the dashboard's lists: by status / by mode / all, newest first
        CREATE INDEX rollouts_status_created ON rollouts (status, created_at, seq);
        CREATE INDEX rollouts_mode_created ON rollouts (mode, created_at, seq);
        CREATE INDEX rollouts_created ON rollouts (created_at, seq);
        -- deadline: when an active attempt is due for a timeout/unresponsive check;
        -- claim_order: the order claims of one request are replayed in
        CREATE TABLE attempts (
            attempt_id text PRIMARY KEY,
            rollout_id text NOT NULL,
            rollout_seq bigint NOT NULL,
            sequence_id integer NOT NULL,
            worker_id text,
            status text NOT NULL,
            start_time double precision NOT NULL,
            end_time double precision,
            last_heartbeat_time double precision NOT NULL,
            resources_version integer,
            error text,
            metadata text NOT NULL,
            reward double precision,
            next_span_seq bigint NOT NULL DEFAULT 0,
            deadline double precision,
            claim_request_id text,
            claim_order bigint GENERATED ALWAYS AS IDENTITY
        );
        CREATE UNIQUE INDEX attempts_rollout ON attempts (rollout_seq, sequence_id);
        CREATE INDEX attempts_deadline ON attempts (deadline) WHERE deadline IS NOT NULL;
        CREATE INDEX attempts_claim ON attempts (claim_request_id) WHERE claim_request_id IS NOT NULL;
        CREATE TABLE claim_requests (request_id text PRIMARY KEY, created_at double precision NOT NULL);
        -- a span's identity (rollout_id, attempt_id, span_id) as (rollout_seq, attempt_seq,
        -- span_id); data: the full span as JSONB, or raw: as JSON text when it holds a NUL
        CREATE TABLE spans (
            rollout_seq bigint NOT NULL,
            attempt_seq integer NOT NULL,
            span_id text NOT NULL,
            sequence_id bigint NOT NULL,
            name text NOT NULL,
            start_time double precision NOT NULL,
            data jsonb,
            raw text,
            PRIMARY KEY (rollout_seq, attempt_seq, span_id),
            CHECK ((data IS NULL) <> (raw IS NULL))
        );
        CREATE INDEX spans_order ON spans (rollout_seq, attempt_seq, sequence_id, span_id);
        CREATE TABLE resources (
            version integer PRIMARY KEY,
            created_at double precision NOT NULL,
            resources text NOT NULL,
            metadata text NOT NULL
        );
        CREATE TABLE workers (
            worker_id text PRIMARY KEY,
            status text NOT NULL,
            created_at double precision NOT NULL,
            last_heartbeat_time double precision NOT NULL,
            current_rollout_id text,
            current_attempt_id text,
            metadata text NOT NULL
        );
        -- training metrics: one row per (run_id, step), values merged with jsonb ||
        CREATE TABLE metrics (
            run_id text NOT NULL,
            step bigint NOT NULL,
            timestamp double precision NOT NULL,
            data jsonb NOT NULL,
            PRIMARY KEY (run_id, step)
        );
        CREATE SEQUENCE metric_writes;
        CREATE TABLE metric_runs (run_id text PRIMARY KEY, last_write bigint NOT NULL);
        CREATE INDEX metric_runs_recent ON metric_runs (last_write);
        """,
    ),
    Migration(
        "search: a trigram index on id and input when pg_trgm is installed (else searches scan)",
        f"""
        DO $$
        DECLARE trgm_schema text;
        BEGIN
            SELECT n.nspname INTO trgm_schema FROM pg_extension e
                JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
            IF trgm_schema IS NOT NULL THEN
                EXECUTE format(
                    'CREATE INDEX rollouts_search ON rollouts USING gin ((%s) %I.gin_trgm_ops)',
                    $q${SEARCH_TEXT}$q$, trgm_schema);
            END IF;
        END $$;
        """,
    ),
]

SCHEMA_VERSION = len(MIGRATIONS)

_MIGRATION_LOCK = 0x616762_6F6C74  # advisory lock key ("agbolt"): one migration at a time per database
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def check_schema_name(schema: str) -> str:
    """``schema`` if it is a plain lowercase SQL identifier (it is spliced into SQL)."""
    if not _SCHEMA_NAME.fullmatch(schema):
        raise InvalidRequestError(
            f"invalid PostgreSQL schema name {schema!r}: use lowercase letters, digits and _ "
            "(at most 63, not starting with a digit)"
        )
    return schema


async def _ensure_trgm(conn: Any) -> None:
    """Install pg_trgm if the server has it and we may (else searches scan: still correct)."""
    import psycopg

    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'), "
        "(SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_trgm')"
    )
    installed, available = await cur.fetchone()
    if installed or not available:
        return
    try:
        async with conn.transaction():
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
    except psycopg.Error:
        pass  # no privilege: fine


async def migrate(conn: Any, schema: str, steps: list[Migration] = MIGRATIONS) -> int:
    """Create ``schema`` if needed and apply the missing steps; returns how many ran (0 if
    current). ``conn`` is an autocommit :class:`psycopg.AsyncConnection`."""
    table = f'"{schema}".agentbolt_migrations'
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
    (exists,) = await cur.fetchone()
    if exists:
        cur = await conn.execute(f"SELECT coalesce(max(version), 0) FROM {table}")
        (current,) = await cur.fetchone()
        _check_not_newer(current, len(steps))
        if current == len(steps):
            return 0
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await _ensure_trgm(conn)
        await conn.execute(
            f'CREATE SCHEMA IF NOT EXISTS "{schema}"; '
            f"CREATE TABLE IF NOT EXISTS {table} (version integer PRIMARY KEY, "
            "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute(f"SELECT coalesce(max(version), 0) FROM {table}")
        (current,) = await cur.fetchone()  # again, under the lock: another server may have won
        _check_not_newer(current, len(steps))
        todo = steps[current:]
        if not todo:
            return 0
        sql = f'SET LOCAL search_path TO "{schema}";\n' + "\n".join(step.sql for step in todo)
        await conn.execute(sql)
        async with conn.cursor() as c:
            await c.executemany(
                f"INSERT INTO {table} (version, description) VALUES (%s, %s)",
                [(current + i, step.description) for i, step in enumerate(todo, start=1)],
            )
    return len(todo)


def _check_not_newer(current: int, known: int) -> None:
    if current > known:
        raise SchemaVersionError(
            f"this database schema has version {current} but this agentbolt knows only {known}: "
            "it was migrated by a newer agentbolt; upgrade agentbolt to open it"
        )


async def load_secret(conn: Any, schema: str) -> bytes:
    """The store's signing secret: 32 random bytes made on first open and kept."""
    await conn.execute(
        f'INSERT INTO "{schema}".meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING',
        ("secret", os.urandom(32)),
    )
    cur = await conn.execute(f'SELECT value FROM "{schema}".meta WHERE key = %s', ("secret",))
    (value,) = await cur.fetchone()
    return bytes(value)
