"""Shared fixtures: core tests run on asyncio and trio (memory store), and on asyncio with a
real SQLite file and a real PostgreSQL server (``ACTORLOG_TEST_POSTGRES_URL`` or
``DATABASE_URL``; ``.ci/run`` starts one; without one the postgres cases skip, except under
``CI``, where they fail)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

StoreFactory = Callable[[], Store]


@pytest.fixture(
    params=[
        pytest.param(("asyncio", "memory"), id="asyncio-memory"),
        pytest.param(("trio", "memory"), id="trio-memory"),
        pytest.param(("asyncio", "sqlite"), id="asyncio-sqlite"),
        pytest.param(("asyncio", "postgres"), id="asyncio-postgres"),
    ]
)
def backend_and_store(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]  # pytest params are untyped


@pytest.fixture
def anyio_backend(backend_and_store: tuple[str, str]) -> str:
    return backend_and_store[0]


@pytest.fixture
def make_store(backend_and_store: tuple[str, str], tmp_path: Path) -> StoreFactory:
    """A factory returning a store over the same data each call (a fresh object for SQLite,
    the same object for memory), so a test can 'restart' the system."""
    kind = backend_and_store[1]
    if kind == "memory":
        mem = MemoryStore()
        return lambda: mem
    if kind == "postgres":
        url = os.environ.get("ACTORLOG_TEST_POSTGRES_URL") or os.environ.get("DATABASE_URL")
        if not url:
            reason = "no PostgreSQL server (source .ci/pg.sh; pg_start)"
            if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
                pytest.fail(f"{reason}: CI is set, so .ci/run must start one", pytrace=False)
            pytest.skip(reason)
        from actorlog.stores import PostgresStore

        schema = f"rt_{uuid.uuid4().hex[:12]}"  # a fresh, isolated store per test
        return lambda: PostgresStore(url, schema=schema)
    path = tmp_path / "agents.db"
    return lambda: SqliteStore(path)
