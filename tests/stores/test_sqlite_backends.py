"""``SqliteStore`` on either anyio backend (issue 30): one file written under trio reads the
same under asyncio and back, and the connection layer's cancellation promise (a cancelled
caller never leaves a statement half done, nor returns while it still runs).

The store contract kit runs on both backends too (``anyio_backend`` in conftest.py)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from actorlog.store import StoreClosedError, TimerRow
from actorlog.stores import SqliteStore
from actorlog.stores._sqlite_conn import Connection
from actorlog.testing._kit import msg


async def _write(path: Path, actor: str, upto: int) -> None:
    store = SqliteStore(path)
    await store.open()
    try:
        await store.register_actor(actor, "T")
        row = await store.get_actor(actor)
        assert row is not None
        last = row.last_seq
        await store.append(actor, last, [msg(actor, s) for s in range(last + 1, upto + 1)])
        await store.put_timer(
            TimerRow(f"t-{actor}", actor, "T", 5.0, "m", "tag", "{}", None, None, "pending", 1.0)
        )
        assert await store.compact(actor, 2, checksum=0) >= 1
    finally:
        await store.close()


async def _read(path: Path, actor: str) -> tuple[list[int], int, list[str]]:
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        seqs = [r.seq for r in await store.read(actor)]
        start = await store.log_start(actor)
        timers = [t.timer_id for t in await store.list_timers(actor)]
        return seqs, start.first_seq if start else 0, timers
    finally:
        await store.close()


def test_a_store_written_on_trio_reads_the_same_on_asyncio_and_back(tmp_path: Path) -> None:
    """Before issue 30, ``open`` under trio raised ConfigurationError ("needs asyncio")."""
    path = tmp_path / "agents.db"
    anyio.run(_write, path, "a", 5, backend="trio")
    assert anyio.run(_read, path, "a", backend="asyncio") == ([3, 4, 5], 3, ["t-a"])
    anyio.run(_write, path, "b", 4, backend="asyncio")
    assert anyio.run(_read, path, "b", backend="trio") == ([3, 4], 3, ["t-b"])
    with closing(sqlite3.connect(path)) as db:  # committed: a third connection sees it all
        assert db.execute("SELECT count(*) FROM entries").fetchone() == (5,)


pytestmark = pytest.mark.anyio


async def test_a_cancelled_caller_returns_only_when_its_statement_is_done(
    tmp_path: Path, anyio_backend: str
) -> None:
    """A transaction of 20,000 rows in one call, its caller cancelled while it runs: the
    caller gets control back only after the thread committed it (never half done, never
    still running), and the connection has no transaction left open."""
    conn = await Connection.connect(str(tmp_path / "c.db"))
    seen: list[object] = []

    async def insert(rows: list[tuple[int, bytes]]) -> None:
        try:
            await conn.insert_many("INSERT INTO t VALUES (?, ?)", rows)
        finally:  # what another connection sees the moment the caller has control again
            with closing(sqlite3.connect(tmp_path / "c.db")) as other:
                seen.append(other.execute("SELECT count(*) FROM t").fetchone())
            seen.append(conn.in_transaction)

    try:
        await conn.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b BLOB)")
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(insert, [(i, b"x" * 100) for i in range(20_000)])
                await anyio.lowlevel.checkpoint()  # let it start, then cancel it
                scope.cancel()
        assert seen == [(20_000,), False]
        await conn.execute("INSERT INTO t VALUES (-1, x'00')")  # the connection goes on
    finally:
        await conn.close()


async def test_a_call_on_a_closed_connection_is_refused(tmp_path: Path, anyio_backend: str) -> None:
    conn = await Connection.connect(str(tmp_path / "c.db"))
    await conn.close()
    await conn.close()  # twice is harmless
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        await conn.execute_fetchall("SELECT 1")


async def test_a_read_racing_close_is_store_closed(tmp_path: Path, anyio_backend: str) -> None:
    """A read queued behind ``close`` on the same connection: ``StoreClosedError``, as for a
    read after close (not a transient ``StoreUnavailableError``)."""
    store = SqliteStore(tmp_path / "a.db")
    await store.open()
    reader = store._reader()
    await store.close()
    with pytest.raises(StoreClosedError):
        try:
            await reader.execute_fetchall("SELECT 1")
        except sqlite3.Error as exc:
            raise store._error("read", exc) from exc
