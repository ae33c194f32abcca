"""Property/fuzz test of the HTTP API: thousands of generated requests — valid and
deliberately invalid (negative mode) — from the app's own ``/openapi.json``. The
server must answer every one without a 5xx. Acceptance of the control-plane issue; the
authenticated run is repeated on a PostgreSQL-backed server (skipped without PostgreSQL
at 127.0.0.1:5432)."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pytest
import schemathesis
from schemathesis.generation import GenerationMode

from agentbolt.server.app import create_app
from agentbolt.store.base import Store
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import RolloutCreate
from tests.store.postgres_support import POSTGRES_URL, new_schema, postgres_unavailable

ADMIN = "fuzz-admin-token"
EXAMPLES = int(os.environ.get("AGENTBOLT_FUZZ_EXAMPLES", "60"))
POSTGRES_EXAMPLES = int(os.environ.get("AGENTBOLT_FUZZ_EXAMPLES_POSTGRES", str(max(1, EXAMPLES // 2))))
"""Fewer by default: the HTTP layer is the same, and the run must fit the CI budget."""


async def _seed(store: Store) -> None:
    await store.start()
    await store.enqueue_rollouts([RolloutCreate(rollout_id=f"seed-{i}", input={"i": i}) for i in range(5)])
    await store.claim_rollouts("seed-worker", 2)
    await store.close()


def _fuzz_schema(store: Store, examples: int) -> schemathesis.schemas.BaseSchema:
    """The app over ``store`` (seeded), as a schemathesis schema generating ``examples``
    requests per operation."""
    asyncio.run(_seed(store))
    fuzzed = schemathesis.openapi.from_asgi("/openapi.json", create_app(store, admin_token=ADMIN))
    fuzzed.config.generation.update(
        max_examples=examples,
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        no_shrink=True,
    )
    return fuzzed


_db_dir = Path(tempfile.mkdtemp(prefix="agentbolt-fuzz-"))
_store = SqliteStore(_db_dir / "store.db")
schema = _fuzz_schema(_store, EXAMPLES)

_POSTGRES_SKIP = postgres_unavailable()
_pg_store = None
if _POSTGRES_SKIP is None:
    from agentbolt.store.postgres import PostgresStore

    # the schema survives the seed's close (and the app's); the module fixture below drops it
    _pg_store = PostgresStore(POSTGRES_URL, schema=new_schema(), drop_schema_on_close=False)
    pg_schema = _fuzz_schema(_pg_store, POSTGRES_EXAMPLES)

pytestmark = pytest.mark.slow

_seen: dict[str, int] = {}


@schema.parametrize()
def test_no_request_gets_a_server_error(case: schemathesis.Case) -> None:
    response = case.call(headers={"Authorization": f"Bearer {ADMIN}"})
    _seen[case.operation.label] = _seen.get(case.operation.label, 0) + 1
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
    )


@schema.parametrize()
def test_unauthenticated_requests_are_refused_not_crashed(case: schemathesis.Case) -> None:
    response = case.call()
    assert response.status_code < 500
    if case.path.startswith("/v1/"):
        # no token: never served (401, or an earlier 4xx for a malformed request)
        assert 400 <= response.status_code < 500, response.text[:300]


if _POSTGRES_SKIP is None:

    @pg_schema.parametrize()
    def test_no_request_gets_a_server_error_from_a_postgres_backed_server(case: schemathesis.Case) -> None:
        # one transaction per op (no group commit): a generated 10,000-op batch takes
        # longer than on SQLite, hence the longer read timeout
        response = case.call(headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120)
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:500]}"
        )

else:

    def test_no_request_gets_a_server_error_from_a_postgres_backed_server() -> None:
        pytest.skip(_POSTGRES_SKIP)


@pytest.fixture(scope="module", autouse=True)
def _report_request_count():
    yield
    total = sum(_seen.values())
    print(f"\nfuzz: {total} generated requests over {len(_seen)} operations (authenticated)")
    if _pg_store is not None:
        import psycopg

        asyncio.run(_pg_store.close())  # the app's lifespan may have closed it already
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{_pg_store.schema}" CASCADE')
