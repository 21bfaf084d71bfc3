"""Fixtures for the store contract suite: one harness per store kind.

A :class:`StoreHarness` opens store instances of one kind on one backing database (a temp
SQLite file, a fresh PostgreSQL schema) and can reach under the store to damage it, which
the contract tests need and the store API rightly does not offer.

PostgreSQL: set ``ACTORLOG_TEST_POSTGRES_URL`` (or ``DATABASE_URL``), e.g. with
``source .ci/pg.sh; pg_start``. Each test gets its own schema, dropped afterwards. Without
a URL the postgres cases skip, except under CI (``CI`` set), where they fail: CI must test
every store (``tests/_pg.py``).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING

import anyio.to_thread
import asyncpg
import pytest
from actorlog import testing
from actorlog.store import EntryRow, Store
from actorlog.stores import MemoryStore, PostgresStore, SqliteStore
from actorlog.stores._sql import ENTRY_COLS, entry_values

from tests import _pg

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests a store kind cannot apply to (the kit's ``needs`` tag on a test,
    or ``@pytest.mark.needs``, against the harness's ``lacks``), so that a run never
    reports skips for cases that cannot apply."""
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        kind = callspec.params.get("harness") if callspec is not None else None
        backend = callspec.params.get("anyio_backend") if callspec is not None else None
        if backend == "trio" and (kind == "postgres" or _uses_postgres(item)):
            drop.append(item)  # asyncpg runs on asyncio only (the error says so: a test)
            continue
        needs = {n for m in item.iter_markers("needs") for n in m.args}
        needs |= getattr(getattr(item, "function", None), "actorlog_needs", frozenset())
        harness = HARNESSES.get(kind) if isinstance(kind, str) else None
        if harness is None:  # a kit class over another harness (the third-party proof)
            harness = getattr(getattr(item, "cls", None), "harness_class", None)
        if harness is not None and needs & harness.lacks:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _uses_postgres(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return item.path.name.startswith("test_postgres") or any(
        n in names for n in ("postgres_url", "pg_harness", "other_pg_harness")
    )


STORE_KINDS = ("memory", "sqlite", "sqlite-on-loop", "postgres")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Store tests run on asyncio and on trio; PostgreSQL's on asyncio only (asyncpg is an
    asyncio library: its trio cases are deselected above)."""
    return request.param  # type: ignore[no-any-return]  # pytest params are untyped


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The server the postgres cases use; skips (or, under CI, fails) without one."""
    return _pg.postgres_url("PostgresStore contract tests")


class StoreHarness(testing.StoreHarness):
    """The kit's harness, for actorlog's own stores: their commit batch sizes."""

    kind: str = ""

    def batch_sizes(self, store: Store) -> list[int]:
        sizes: list[int] = getattr(store, "batch_sizes")  # noqa: B009 - our stores' own
        return sizes


class MemoryHarness(StoreHarness):
    kind = "memory"
    # a MemoryStore's reading() view is a copy: a write to it reaches nothing, so it is not
    # refused either
    lacks = frozenset({"multi_process", "durable", "group_commit", "view_refuses_writes"})

    def new(self, *, read_only: bool = False) -> Store:
        if read_only:
            pytest.skip("MemoryStore has no read-only mode")
        return MemoryStore()

    async def damage_payload(self, store: Store, actor_id: str, seq: int, payload: bytes) -> None:
        assert isinstance(store, MemoryStore)
        [old] = await store.read(actor_id, after_seq=seq - 1, upto_seq=seq)
        store.replace_row(
            actor_id,
            seq,
            EntryRow(
                old.actor_id,
                old.seq,
                old.kind,
                old.type_tag,
                old.ref,
                old.message_id,
                payload,
                old.checksum,
            ),
        )


class SqliteHarness(StoreHarness):
    kind = "sqlite"
    lacks = frozenset({"multi_process"})  # one writer per file (the lock)

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def new(self, *, read_only: bool = False) -> Store:
        return SqliteStore(self.path, read_only=read_only)

    async def _execute(self, sql: str, *params: object) -> None:
        def run() -> None:
            with closing(sqlite3.connect(self.path, isolation_level=None)) as conn:
                conn.execute("PRAGMA busy_timeout=5000")
                conn.execute(sql, params)

        await anyio.to_thread.run_sync(run)  # any backend

    async def damage_payload(self, store: Store, actor_id: str, seq: int, payload: bytes) -> None:
        await self._execute(
            "UPDATE entries SET payload = ? WHERE actor_id = ? AND seq = ?", payload, actor_id, seq
        )

    async def raw_insert(self, row: EntryRow) -> None:
        await self._execute(
            f"INSERT INTO entries ({ENTRY_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            *entry_values(row),
        )

    async def set_format_version(self, version: int) -> None:
        await self._execute(
            "UPDATE actorlog_meta SET value = ? WHERE key = 'format_version'", str(version)
        )


class SqliteOnLoopHarness(SqliteHarness):
    """``SqliteStore(commit_on_loop=True)``: lone appends commit on the loop's thread."""

    kind = "sqlite-on-loop"

    def new(self, *, read_only: bool = False) -> Store:
        return SqliteStore(self.path, read_only=read_only, commit_on_loop=True)


class PostgresHarness(StoreHarness):
    kind = "postgres"

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.schema = _pg.new_schema("actorlog_test")

    def new(self, *, read_only: bool = False) -> Store:
        return PostgresStore(
            self.url, schema=self.schema, read_only=read_only, min_size=1, max_size=4
        )

    async def _execute(self, sql: str, *params: object) -> None:
        conn = await asyncpg.connect(self.url, server_settings={"search_path": self.schema})
        try:
            await conn.execute(sql, *params)
        finally:
            await conn.close()

    async def damage_payload(self, store: Store, actor_id: str, seq: int, payload: bytes) -> None:
        await self._execute(
            "UPDATE entries SET payload = $1 WHERE actor_id = $2 AND seq = $3",
            payload,
            actor_id,
            seq,
        )

    async def raw_insert(self, row: EntryRow) -> None:
        await self._execute(
            f"INSERT INTO entries ({ENTRY_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            *entry_values(row),
        )

    async def set_format_version(self, version: int) -> None:
        await self._execute(
            "UPDATE actorlog_meta SET value = $1 WHERE key = 'format_version'", str(version)
        )

    async def aclose(self) -> None:
        await super().aclose()
        await _pg.drop_schemas(self.url, self.schema)


HARNESSES: dict[str, type[StoreHarness]] = {
    "memory": MemoryHarness,
    "sqlite": SqliteHarness,
    "sqlite-on-loop": SqliteOnLoopHarness,
    "postgres": PostgresHarness,
}


@pytest.fixture(params=STORE_KINDS)
async def harness(
    request: pytest.FixtureRequest, anyio_backend: str, tmp_path: Path
) -> AsyncIterator[StoreHarness]:
    """A harness for each store kind: every contract test runs once per store."""
    kind: str = request.param
    h: StoreHarness
    if kind == "memory":
        h = MemoryHarness()
    elif kind == "sqlite":
        h = SqliteHarness(tmp_path / "actorlog.db")
    elif kind == "sqlite-on-loop":
        h = SqliteOnLoopHarness(tmp_path / "actorlog.db")
    else:
        h = PostgresHarness(request.getfixturevalue("postgres_url"))
    try:
        yield h
    finally:
        await h.aclose()


@pytest.fixture
async def store(harness: StoreHarness) -> Store:
    """An opened store of the harness's kind."""
    return await harness.open()


@pytest.fixture
async def pg_harness(postgres_url: str, anyio_backend: str) -> AsyncIterator[PostgresHarness]:
    """A PostgreSQL harness (fresh schema, dropped afterwards) for PostgreSQL-only tests."""
    h = PostgresHarness(postgres_url)
    try:
        yield h
    finally:
        await h.aclose()


@pytest.fixture
async def other_pg_harness(postgres_url: str, anyio_backend: str) -> AsyncIterator[PostgresHarness]:
    """A second PostgreSQL harness (another fresh schema in the same database)."""
    h = PostgresHarness(postgres_url)
    try:
        yield h
    finally:
        await h.aclose()
