"""Shared fixtures: core tests run on asyncio and trio (memory store and a real SQLite file),
and on asyncio with a real PostgreSQL server (``ACTORLOG_TEST_POSTGRES_URL`` or
``DATABASE_URL``; ``.ci/run`` starts one; without one the postgres cases skip, except under
``CI``, where they fail: ``tests/_pg.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

from tests import _pg

StoreFactory = Callable[[], Store]


@pytest.fixture(
    params=[
        pytest.param(("asyncio", "memory"), id="asyncio-memory"),
        pytest.param(("trio", "memory"), id="trio-memory"),
        pytest.param(("asyncio", "sqlite"), id="asyncio-sqlite"),
        pytest.param(("trio", "sqlite"), id="trio-sqlite"),
        pytest.param(("asyncio", "postgres"), id="asyncio-postgres"),
    ]
)
def backend_and_store(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]  # pytest params are untyped


@pytest.fixture
def anyio_backend(backend_and_store: tuple[str, str]) -> str:
    return backend_and_store[0]


@pytest.fixture
async def make_store(
    backend_and_store: tuple[str, str], tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    """A factory returning a store over the same data each call (a fresh object for SQLite
    and PostgreSQL, the same object for memory), so a test can 'restart' the system."""
    kind = backend_and_store[1]
    if kind == "memory":
        mem = MemoryStore()
        yield lambda: mem
    elif kind == "postgres":
        url = _pg.postgres_url("the runtime's postgres cases")
        from actorlog.stores import PostgresStore  # needs asyncpg: only when used

        schema = _pg.new_schema("rt")  # a fresh, isolated store per test
        yield lambda: PostgresStore(url, schema=schema)
        await _pg.drop_schemas(url, schema)
    else:
        path = tmp_path / "agents.db"
        yield lambda: SqliteStore(path)
