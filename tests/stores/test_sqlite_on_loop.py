"""``SqliteStore(commit_on_loop=...)``: where a lone append commits. ``True``: on the event
loop's thread, on the writer connection itself while its thread is idle (the contract kit
runs on it too: the ``sqlite-on-loop`` harness); ``"auto"`` (the default, the ``sqlite``
harness): there while recent lone commits were fast, else on the writer's thread.

Checked here: which thread commits what (lone appends on the loop, batches through the
writer's thread), that a commit is on disk when ``append`` returns, that it never runs on the
loop while the writer's thread has a call or a transaction open, that a slow commit sends
``"auto"`` back to the thread, a caller cancelled around an on-loop commit, that the
writer's thread keeps the store's ``busy_timeout`` (an on-loop commit runs at 0), and bad
input.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from actorlog import StoreURLError
from actorlog.store import ConfigurationError, SequenceConflictError
from actorlog.stores import SqliteStore, open_store
from actorlog.stores._sqlite_commit import LOOP_LIMIT, LOOP_WEIGHT
from actorlog.testing._kit import msg, snapshot

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


def on_loop(store: SqliteStore) -> int:
    """How many commits ran on the event loop's thread."""
    return store._loop_commits


@contextmanager
def write_lock_held(path: Path, seconds: float) -> Iterator[None]:
    """Another connection holds SQLite's write lock on ``path`` for ``seconds`` from now (a
    thread of its own ends the transaction), like a slow disk or another process's write."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    timer = threading.Timer(seconds, other.execute, ("COMMIT",))
    timer.start()
    try:
        yield
    finally:
        timer.join()
        other.close()


def fast_commits(store: SqliteStore, n: int = 8 * LOOP_WEIGHT) -> None:
    """Note ``n`` instant lone commits (as after a run of fast ones)."""
    for _ in range(n):
        store._took(0.0)


async def three_appends_each(store: SqliteStore, ids: list[str]) -> list[int]:
    """Each of ``ids`` appends seqs 1..3 concurrently with the others: the batch sizes of
    the commits that made."""
    start = len(store.batch_sizes)

    async def writer(actor_id: str) -> None:
        for seq in range(1, 4):
            await store.append(actor_id, seq - 1, [msg(actor_id, seq)])

    async with anyio.create_task_group() as tg:
        for actor_id in ids:
            tg.start_soon(writer, actor_id)
    return store.batch_sizes[start:]


async def test_a_lone_append_commits_on_the_loop_and_is_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    async with opened(SqliteStore(path, commit_on_loop=True), "a") as store:
        await store.append("a", 0, [msg("a", 1), msg("a", 2)])
        assert on_loop(store) == 1
        assert on_disk(path, "a") == [1, 2]  # committed: another connection sees it
        assert (await store.get_actor("a")).last_seq == 2  # type: ignore[union-attr]


async def test_false_commits_everything_on_the_writers_thread(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db", commit_on_loop=False), "a") as store:
        for seq in range(1, 41):
            await store.append("a", seq - 1, [msg("a", seq)])
        assert on_loop(store) == 0
        assert on_disk(tmp_path / "a.db", "a") == list(range(1, 41))


async def test_concurrent_appends_still_share_transactions(tmp_path: Path) -> None:
    ids = [f"w{i}" for i in range(40)]
    async with opened(SqliteStore(tmp_path / "a.db", commit_on_loop=True), *ids) as store:
        batches = await three_appends_each(store, ids)
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
        with anyio.fail_after(5):
            await store.append("a", 0, [msg("a", 1)])  # no "database is locked"
        assert on_loop(store) == 0
        await writer.execute("COMMIT")
        assert on_disk(tmp_path / "a.db", "a") == [1]
        await store.append("a", 1, [msg("a", 2)])  # and on the loop again afterwards
        assert on_loop(store) == 1


async def test_a_conflict_is_reported_as_without_the_option(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db", commit_on_loop=True), "a") as store:
        await store.append("a", 0, [msg("a", 1)])
        with pytest.raises(SequenceConflictError):
            await store.append("a", 0, [msg("a", 1)])
        assert [r.seq for r in await store.read("a")] == [1]


class _EqualsAnything:
    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


@pytest.mark.parametrize("bad", ["yes", "Auto", "", 1, 0, None, _EqualsAnything()])
def test_commit_on_loop_must_be_a_bool_or_auto(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="commit_on_loop must be True, False or 'auto'"):
        SqliteStore(tmp_path / "a.db", commit_on_loop=bad)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_auto_is_the_default(tmp_path: Path) -> None:
    assert SqliteStore(tmp_path / "a.db").commit_on_loop == "auto"
    assert SqliteStore(tmp_path / "a.db", commit_on_loop="auto").commit_on_loop == "auto"


async def test_a_read_only_store_ignores_it(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db")):
        pass  # the file, with its schema
    reader = SqliteStore(tmp_path / "a.db", read_only=True, commit_on_loop=True)
    async with opened(reader):
        assert await reader.list_actors() == []


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
    assert (plain.commit_on_loop, plain.durability) == ("auto", "fsync")
    both = open_store(base + "?commit_on_loop=1&durability=survive-process-crash")
    assert isinstance(both, SqliteStore)
    assert (both.commit_on_loop, both.durability) == (True, "survive-process-crash")
    off = open_store(base + "?commit_on_loop=0&durability=fsync")
    assert isinstance(off, SqliteStore) and off.commit_on_loop is False
    auto = open_store(base + "?commit_on_loop=auto")
    assert isinstance(auto, SqliteStore) and auto.commit_on_loop == "auto"
    with pytest.raises(StoreURLError, match="commit_on_loop must be auto, 1 or 0"):
        open_store(base + "?commit_on_loop=maybe")
    with pytest.raises(StoreURLError, match="unknown durability"):
        open_store(base + "?durability=sometimes")


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("comit_on_loop=1", "unknown parameter 'comit_on_loop': a sqlite:// URL takes"),
        ("commit_on_loop=1&commit_on_loop=0", "given more than once: 'commit_on_loop'"),
        ("durability=fsync&durability=fsync", "given more than once: 'durability'"),
        ("commit_on_loop=yes", "commit_on_loop must be auto, 1 or 0, not 'yes'"),
        ("commit_on_loop=true", "commit_on_loop must be auto, 1 or 0, not 'true'"),
        ("commit_on_loop=2", "commit_on_loop must be auto, 1 or 0, not '2'"),
        ("commit_on_loop=AUTO", "commit_on_loop must be auto, 1 or 0, not 'AUTO'"),
        ("commit_on_loop=", "commit_on_loop must be auto, 1 or 0, not ''"),
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
async def test_a_commit_on_the_loop_is_as_durable_as_on_the_thread(
    tmp_path: Path, durability: str, level: int
) -> None:
    """Both run on the writer connection: its synchronous setting, FULL (2) or NORMAL (1)."""
    store = SqliteStore(tmp_path / "a.db", durability=durability, commit_on_loop=True)  # type: ignore[arg-type]
    async with opened(store, "a"):
        await store.append("a", 0, [msg("a", 1)])
        assert on_loop(store) == 1
        (got,) = next(iter(await store._writer().execute_fetchall("PRAGMA synchronous")))
        assert got == level


async def test_never_commits_on_the_loop_while_the_writers_thread_runs_a_call(
    tmp_path: Path,
) -> None:
    """Defect: with ``commit_on_loop=True`` a lone commit went to a second connection while
    the writer's thread ran a statement holding SQLite's write lock (a compaction's
    ``DELETE``): the loop stopped until the lock came free, and the append failed "database
    is locked" past ``busy_timeout``. It must wait for its turn on the writer's thread."""
    path = tmp_path / "a.db"
    store = SqliteStore(path, commit_on_loop=True, busy_timeout=0.1)
    async with opened(store, "a"):
        writer = store._writer()

        def long_transaction(conn: sqlite3.Connection) -> None:
            # one statement (no transaction left open) holding the write lock for longer
            # than busy_timeout, as a compaction's DELETE on a large log
            def pause() -> int:
                time.sleep(0.5)
                return 1

            conn.create_function("pause", 0, pause)
            conn.execute("UPDATE actorlog_meta SET value = value WHERE pause()")

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer._call, long_transaction, writer._open())
            with anyio.fail_after(5):
                while writer.idle() is not None:  # until the call is queued
                    await anyio.lowlevel.checkpoint()
            await store.append("a", 0, [msg("a", 1)])  # after it, on the thread
        assert on_loop(store) == 0
        assert on_disk(path, "a") == [1]
        await store.append("a", 1, [msg("a", 2)])
        assert on_loop(store) == 1  # idle again: on the loop


async def test_auto_starts_on_the_thread(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db"), "a") as store:
        await store.append("a", 0, [msg("a", 1)])  # nothing measured yet: the thread
        assert on_loop(store) == 0
        assert store._committer.gather == "when_shared"


async def test_auto_commits_on_the_loop_while_commits_are_fast(tmp_path: Path) -> None:
    async with opened(SqliteStore(tmp_path / "a.db"), "a") as store:
        await store.append("a", 0, [msg("a", 1)])
        fast_commits(store)
        assert store._committer.gather == "always"  # so that others can join a batch
        await store.append("a", 1, [msg("a", 2)])
        assert on_loop(store) == 1
        assert on_disk(tmp_path / "a.db", "a") == [1, 2]


async def test_auto_sends_lone_commits_to_the_thread_after_a_slow_one(tmp_path: Path) -> None:
    """A slow commit (here one that waited 0.3 s for a lock on the writer's thread; a slow
    disk would do the same): the next lone commits go to the writer's thread, until fast
    ones bring the running mean back under the limit."""
    path = tmp_path / "a.db"
    async with opened(SqliteStore(path), "a") as store:
        fast_commits(store)
        await store.append("a", 0, [msg("a", 1)])
        assert on_loop(store) == 1
        with write_lock_held(path, 0.3):
            await store.append("a", 1, [msg("a", 2)])  # the loop does not wait: the thread does
        assert on_loop(store) == 1
        assert store._commit_mean > LOOP_LIMIT
        assert store._committer.gather == "when_shared"
        await store.append("a", 2, [msg("a", 3)])
        assert on_loop(store) == 1  # on the writer's thread
        fast_commits(store)  # the disk is fast again
        await store.append("a", 3, [msg("a", 4)])
        assert on_loop(store) == 2
        assert on_disk(path, "a") == [1, 2, 3, 4]


@pytest.mark.parametrize("mode", [True, "auto"])
async def test_the_loop_never_waits_for_another_connections_write_lock(
    tmp_path: Path, mode: bool | str
) -> None:
    """Another connection (the operator CLI, a script) holds the write lock: a lone append
    that would commit on the loop leaves the wait to the writer's thread, so the loop's other
    tasks keep running (they stalled for the whole wait, up to ``busy_timeout``, before)."""
    path = tmp_path / "a.db"
    store = SqliteStore(path, commit_on_loop=mode)  # type: ignore[arg-type]
    async with opened(store, "a") as store:
        fast_commits(store)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.01)
                ticks += 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await anyio.sleep(0.05)
            with write_lock_held(path, 0.5):
                before = ticks
                await store.append("a", 0, [msg("a", 1)])
                during = ticks - before
            tg.cancel_scope.cancel()
        assert during >= 5  # 0 when the loop waited for the lock
        assert on_loop(store) == 0
        assert on_disk(path, "a") == [1]
        await store.append("a", 1, [msg("a", 2)])  # the lock is gone: appends go on
        assert on_disk(path, "a") == [1, 2]


async def test_a_slow_commit_on_the_thread_keeps_auto_off_the_loop(tmp_path: Path) -> None:
    """Commits on the thread are measured there too: a slow disk never reaches the loop."""
    path = tmp_path / "a.db"
    async with opened(SqliteStore(path), "a") as store:
        with write_lock_held(path, 0.3):
            await store.append("a", 0, [msg("a", 1)])  # starts on the thread
        assert on_loop(store) == 0
        assert store._commit_mean >= 0.3 / LOOP_WEIGHT
        await store.append("a", 1, [msg("a", 2)])
        assert on_loop(store) == 0


@pytest.mark.parametrize("mode", [True, "auto"])
async def test_appends_woken_together_share_a_batch_while_lone_ones_go_on_the_loop(
    tmp_path: Path, mode: bool | str
) -> None:
    ids = [f"w{i}" for i in range(40)]
    store = SqliteStore(tmp_path / "a.db", commit_on_loop=mode)  # type: ignore[arg-type]
    async with opened(store, *ids):
        fast_commits(store)
        batches = await three_appends_each(store, ids)
        assert sum(batches) == 120
        assert max(batches) >= 20, batches
        assert len(batches) <= 12, batches


async def test_a_deadline_passing_while_a_lone_append_waits_for_a_lock(tmp_path: Path) -> None:
    """A lone append that meets another connection's write lock waits for it on the
    writer's thread, not on the loop; a commit is not cut halfway: a deadline that passes
    meanwhile lets the append return once committed, and the store goes on (back on the
    loop once the lock is gone)."""
    path = tmp_path / "a.db"
    async with opened(SqliteStore(path, commit_on_loop=True), "a") as store:
        returned = False
        with write_lock_held(path, 1.0), anyio.move_on_after(0.3):
            await store.append("a", 0, [msg("a", 1)])
            returned = True
        assert returned
        assert on_loop(store) == 0
        assert on_disk(path, "a") == [1]
        assert store._writer().idle() is not None  # no call left behind, no transaction open
        await store.append("a", 1, [msg("a", 2)])
        assert on_loop(store) == 1
        assert [r.seq for r in await store.read("a")] == [1, 2]


async def test_a_caller_cancelled_while_the_leader_gathers_on_the_loop(tmp_path: Path) -> None:
    """On the loop's path a new leader yields once before it commits: cancelled there, it
    still commits the queue behind it (its own append may or may not be durable), and the
    others' appends are."""
    path = tmp_path / "a.db"
    async with opened(SqliteStore(path, commit_on_loop=True), "a", "b") as store:
        async with anyio.create_task_group() as tg:

            async def first() -> None:
                with anyio.CancelScope() as scope:
                    tg.start_soon(cancel, scope)
                    await store.append("a", 0, [msg("a", 1)])

            async def cancel(scope: anyio.CancelScope) -> None:
                scope.cancel()

            tg.start_soon(first)
            tg.start_soon(store.append, "b", 0, [msg("b", 1)])
        assert on_disk(path, "b") == [1]
        assert on_disk(path, "a") in ([], [1])
        assert store._writer().idle() is not None
        seq = len(on_disk(path, "a"))
        await store.append("a", seq, [msg("a", seq + 1)])
        assert on_disk(path, "a") == list(range(1, seq + 2))


async def test_a_commit_on_the_loop_leaves_the_writers_thread_its_busy_timeout(
    tmp_path: Path,
) -> None:
    """A commit on the loop runs at ``busy_timeout`` 0 (it never waits for another
    connection's lock), set once for a run of them, not around each: the writer's thread
    sets the store's own back before its next call, so its statements still wait for a
    lock another connection holds (here a snapshot written while a script holds the lock
    for 0.3 s), and a read of the setting there gives the store's."""
    path = tmp_path / "a.db"
    store = SqliteStore(path, commit_on_loop=True, busy_timeout=5.0)
    async with opened(store, "a"):
        for seq in range(1, 4):
            await store.append("a", seq - 1, [msg("a", seq)])
        assert on_loop(store) == 3
        with write_lock_held(path, 0.3):
            await store.save_snapshot(snapshot("a", 3))  # no "database is locked"
        assert [s.seq for s in await store.list_snapshots("a")] == [3]
        await store.append("a", 3, [msg("a", 4)])
        assert on_loop(store) == 4
        got = await store._writer().execute_fetchall("PRAGMA busy_timeout")
        assert got == [(5000,)]
        assert on_disk(path, "a") == [1, 2, 3, 4]
