"""Fixtures for the multi-runtime tests: a real PostgreSQL, one fresh schema per test.

Set ``DATABASE_URL`` (or ``ACTORLOG_TEST_POSTGRES_URL``), e.g. ``source .ci/pg.sh; pg_start``.
Without one these tests skip, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from actorlog.stores import PostgresStore

URL_VARS = ("DATABASE_URL", "ACTORLOG_TEST_POSTGRES_URL")


@pytest.fixture
def anyio_backend() -> str:
    """asyncpg runs on asyncio only."""
    return "asyncio"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def pg_url() -> str:
    for var in URL_VARS:
        url = os.environ.get(var)
        if url:
            return url
    reason = "multi-runtime tests need PostgreSQL: set DATABASE_URL (source .ci/pg.sh; pg_start)"
    if _in_ci():
        pytest.fail(f"{reason}; CI is set, so they must run", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
async def pg_schema(pg_url: str) -> AsyncIterator[str]:
    """A fresh schema name, dropped afterwards."""
    schema = f"actorlog_multi_{uuid.uuid4().hex[:12]}"
    yield schema
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
async def pg_store(pg_url: str, pg_schema: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()
    yield store
    await store.close()
