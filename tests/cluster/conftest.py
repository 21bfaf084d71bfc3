"""Fixtures for the multi-runtime tests: a real PostgreSQL, one fresh schema per test.

Set ``ACTORLOG_TEST_POSTGRES_URL`` (or ``DATABASE_URL``), e.g. ``source .ci/pg.sh;
pg_start``. Without one these tests skip, except under CI (``CI`` set), where they fail
(``tests/_pg.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from actorlog.stores import PostgresStore

from tests import _pg


@pytest.fixture
def anyio_backend() -> str:
    """asyncpg runs on asyncio only."""
    return "asyncio"


@pytest.fixture(scope="session")
def pg_url() -> str:
    return _pg.postgres_url("multi-runtime tests")


@pytest.fixture
async def pg_schema(pg_url: str) -> AsyncIterator[str]:
    """A fresh schema name, dropped afterwards."""
    schema = _pg.new_schema("actorlog_multi")
    yield schema
    await _pg.drop_schemas(pg_url, schema)


@pytest.fixture
async def pg_store(pg_url: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()
    yield store
    await store.close()
