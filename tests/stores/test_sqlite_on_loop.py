"""``SqliteStore(commit_on_loop=True)``: a lone append commits on the event loop's thread, on
a connection of its own (the contract kit runs on it too: the ``sqlite-on-loop`` harness).

Checked here: which connection commits what (lone appends directly, batches through
the writer's thread), that a commit is on disk when ``append`` returns, that it never lands
inside a transaction the writer connection has open, and bad input.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path

import anyio
import pytest
from actorlog import StoreURLError
from actorlog.store import ConfigurationError, SequenceConflictError
from actorlog.stores import SqliteStore, open_store
from actorlog.testing._kit import msg

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def opened(store: SqliteStore, *actors: str) -> AsyncIterator[SqliteStore]:
    """``store`` opened, with ``actors`` registered; closed afterwards."""
    await store.open()
    try:
        for actor_id in actors:
            await store.register_actor(actor_id, "T")
        yield store
    finally:
        await store.close()


def on_disk(path: Path, actor_id: str) -> list[int]:
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT seq FROM entries WHERE actor_id = ? ORDER BY seq", (actor_id,))
        return [int(r[0]) for r in rows]


def direct_changes(store: SqliteStore) -> int:
    conn = store._loop_conn
    assert conn is not None
    return conn.total_changes


async def test_a_lone_append_commits_on_the_loop_and_is_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    async with opened(SqliteStore(path, commit_on_loop=True), "a") as store:
        before = direct_changes(store)
        await store.append("a", 0, [msg("a", 1), msg("a", 2)])
        assert direct_changes(store) > before  # the direct connection wrote it
        assert on_disk(path, "a") == [1, 2]  # committed: another connection sees it
        assert (await store.get_actor("a")).last_seq == 2  # type: ignore[union-attr]
    assert store._loop_conn is None


async def test_without_the_option_there_is_no_direct_connection(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db")) as store:
        assert store._loop_conn is None


async def test_concurrent_appends_still_share_transactions(tmp_path: Path) -> None:
    ids = [f"w{i}" for i in range(40)]
    async with opened(SqliteStore(tmp_path / "a.db", commit_on_loop=True), *ids) as store:
        start = len(store.batch_sizes)

        async def writer(actor_id: str) -> None:
            for seq in range(1, 4):
                await store.append(actor_id, seq - 1, [msg(actor_id, seq)])

        async with anyio.create_task_group() as tg:
            for actor_id in ids:
                tg.start_soon(writer, actor_id)
        batches = store.batch_sizes[start:]
        assert sum(batches) == 120
        # the leader waits for the others woken with it: they share its batch, which goes
        # through the writer's thread (a commit without an await would take them one by one)
        assert max(batches) >= 20, batches
        assert len(batches) <= 12, batches
        for actor_id in ids:
            assert [r.seq for r in await store.read(actor_id)] == [1, 2, 3]


async def test_never_commits_inside_the_writers_open_transaction(tmp_path: Path) -> None:
    """While the writer connection holds a transaction open (across awaits), a direct commit
    would wait for SQLite's write lock that only the loop can release: it must go through
    the writer instead (here: into that transaction, as every commit did before)."""
    store = SqliteStore(tmp_path / "a.db", commit_on_loop=True, busy_timeout=0.2)
    async with opened(store, "a"):
        writer = store._writer()
        await writer.execute("BEGIN IMMEDIATE")
        before = direct_changes(store)
        with anyio.fail_after(5):
            await store.append("a", 0, [msg("a", 1)])  # no "database is locked"
        assert direct_changes(store) == before
        await writer.execute("COMMIT")
        assert on_disk(tmp_path / "a.db", "a") == [1]
        await store.append("a", 1, [msg("a", 2)])  # and directly again afterwards
        assert direct_changes(store) > before


async def test_a_conflict_is_reported_as_without_the_option(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db", commit_on_loop=True), "a") as store:
        await store.append("a", 0, [msg("a", 1)])
        with pytest.raises(SequenceConflictError):
            await store.append("a", 0, [msg("a", 1)])
        assert [r.seq for r in await store.read("a")] == [1]


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_commit_on_loop_must_be_a_bool(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="commit_on_loop must be True or False"):
        SqliteStore(tmp_path / "a.db", commit_on_loop=bad)  # type: ignore[arg-type]


async def test_a_read_only_store_ignores_it(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db")):
        pass  # the file, with its schema
    reader = SqliteStore(tmp_path / "a.db", read_only=True, commit_on_loop=True)
    async with opened(reader):
        assert reader._loop_conn is None


@pytest.mark.parametrize("path", [":memory:", ""])
def test_an_in_memory_sqlite_database_is_refused_with_a_pointer(path: str) -> None:
    """Its reader and writer connections would each see a database of their own (before,
    the first read failed as 'damaged schema')."""
    with pytest.raises(ConfigurationError, match="MemoryStore"):
        SqliteStore(path)


def test_store_urls_carry_the_sqlite_options(tmp_path: Path) -> None:
    base = f"sqlite:///{tmp_path}/a.db"
    plain = open_store(base)
    assert isinstance(plain, SqliteStore)
    assert (plain.commit_on_loop, plain.durability) == (False, "fsync")
    both = open_store(base + "?commit_on_loop=1&durability=survive-process-crash")
    assert isinstance(both, SqliteStore)
    assert (both.commit_on_loop, both.durability) == (True, "survive-process-crash")
    off = open_store(base + "?commit_on_loop=0&durability=fsync")
    assert isinstance(off, SqliteStore) and off.commit_on_loop is False
    with pytest.raises(StoreURLError, match="commit_on_loop must be 1 or 0"):
        open_store(base + "?commit_on_loop=maybe")
    with pytest.raises(StoreURLError, match="unknown durability"):
        open_store(base + "?durability=sometimes")


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("comit_on_loop=1", "unknown parameter 'comit_on_loop': a sqlite:// URL takes"),
        ("commit_on_loop=1&commit_on_loop=0", "given more than once: 'commit_on_loop'"),
        ("durability=fsync&durability=fsync", "given more than once: 'durability'"),
        ("commit_on_loop=yes", "commit_on_loop must be 1 or 0, not 'yes'"),
        ("commit_on_loop=true", "commit_on_loop must be 1 or 0, not 'true'"),
        ("commit_on_loop=2", "commit_on_loop must be 1 or 0, not '2'"),
        ("commit_on_loop=", "commit_on_loop must be 1 or 0, not ''"),
        ("durability=FSYNC", "unknown durability 'FSYNC'"),
        ("durability=fsync&x=1&y=2", "unknown parameter 'x', 'y'"),
    ],
)
def test_a_store_url_refuses_unknown_repeated_and_undocumented_parameters(
    tmp_path: Path, query: str, error: str
) -> None:
    """Issue 24, item 16: exactly the documented parameters and values, each once; the
    error names the parameter, and nothing is created."""
    with pytest.raises(StoreURLError) as info:
        open_store(f"sqlite:///{tmp_path}/a.db?{query}")
    assert error in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("postgresql://h/db?schema=a&schema=a", "given more than once: 'schema'"),
        ("postgresql://h/db?sslmode=disable&sslmode=require", "given more than once: 'sslmode'"),
        ("postgresql://h/db?commit_on_loop=1", "unknown parameter 'commit_on_loop'"),
        ("postgresql://h/db?durability=fsync", "unknown parameter 'durability'"),
        ("memory://?commit_on_loop=1", "a memory:// URL takes no parameters"),
    ],
)
def test_other_store_urls_refuse_repeated_and_misplaced_parameters(url: str, error: str) -> None:
    with pytest.raises(StoreURLError) as info:
        open_store(url)
    assert error in str(info.value)


@pytest.mark.parametrize(("durability", "level"), [("fsync", 2), ("survive-process-crash", 1)])
async def test_the_direct_connection_is_as_durable_as_the_writer(
    tmp_path: Path, durability: str, level: int
) -> None:
    """synchronous is per connection: FULL (2) or NORMAL (1), the same on both, and the same
    lock wait."""
    store = SqliteStore(tmp_path / "a.db", durability=durability, commit_on_loop=True)  # type: ignore[arg-type]
    async with opened(store):
        direct = store._loop_conn
        assert direct is not None
        writer = store._writer()
        for pragma in ("synchronous", "busy_timeout"):
            (mine,) = direct.execute(f"PRAGMA {pragma}").fetchone()
            (theirs,) = next(iter(await writer.execute_fetchall(f"PRAGMA {pragma}")))
            assert mine == theirs
        assert direct.execute("PRAGMA synchronous").fetchone()[0] == level
