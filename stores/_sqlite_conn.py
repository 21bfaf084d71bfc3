"""SQLite connections for ``SqliteStore`` on any anyio backend (asyncio or trio).

A :class:`Connection` wraps a stdlib ``sqlite3`` connection that lives on a thread of its
own: each call is queued to that thread, which runs the calls one at a time in order, and
hands each result back to the event loop that asked (``call_soon_threadsafe`` on asyncio,
the trio token's ``run_sync_soon`` on trio), so the loop goes on while SQLite works and
fsyncs. That is aiosqlite's design without its asyncio futures: the same code runs under
trio, with one thread switch each way per call (as fast as aiosqlite on asyncio;
``anyio.to_thread.run_sync`` measured about twice the cost per call here,
docs/benchmarks/backends.md).

Cancellation: a call that was queued runs to its end on the thread, and its caller waits
for that end before the cancellation reaches it (trio: the wait refuses the abort; asyncio:
the caller waits, shielded, for the thread to pass the call). So a cancelled caller never
leaves a statement half done nor returns while its statement still runs, and a transaction
of several statements (:meth:`Connection.insert_many`) is one call: it commits or rolls back
on the thread, never stays open for want of a next await.
"""

from __future__ import annotations

import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from . import _groupcommit

if TYPE_CHECKING:
    import asyncio

__all__ = ["Connection"]

T = TypeVar("T")

#: a queued call: the function, its arguments, and where its (result, error) goes: the
#: asyncio loop and future of its caller, or (trio) a function that reports it
_Job = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.AbstractEventLoop | None", Any]

_CLOSED = "Cannot operate on a closed database."


class Connection:
    """One ``sqlite3`` connection in autocommit mode (``isolation_level=None``) on a thread
    of its own, driven from async code on asyncio or trio; its calls run one at a time, in
    the order they were made.

    Every method is a cancellation point that never abandons a started call (see the module
    docstring). Errors are ``sqlite3``'s own; a call on a closed connection raises
    ``sqlite3.ProgrammingError``.
    """

    __slots__ = ("_busy_now", "_busy_want", "_closed", "_conn", "_inflight", "_jobs", "_thread")

    def __init__(self) -> None:
        self._conn: sqlite3.Connection | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        #: calls queued or running on the thread whose caller has not had its answer yet
        #: (counted on the callers' side: 0 means the thread is not touching the connection)
        self._inflight = 0
        #: the connection's ``busy_timeout`` (ms) for the calls on its thread (at first
        #: ``sqlite3.connect``'s, 5 s), and the one it has now: :meth:`direct` sets 0 for a
        #: statement on the caller's thread, and the thread sets it back before its next call
        self._busy_want = self._busy_now = 5000
        # a daemon: a store never closed must not keep the interpreter from exiting (an
        # unacknowledged commit cut short by the exit is rolled back by SQLite's journal)
        self._thread = threading.Thread(target=self._serve, name="actorlog-sqlite", daemon=True)

    @classmethod
    async def connect(
        cls,
        database: str,
        *,
        uri: bool = False,
        text_factory: Callable[[bytes], object] | None = None,
    ) -> Connection:
        """Open ``database`` on the connection's thread.

        Shielded: a cancelled open would otherwise leave a connection nobody closes.

        Raises:
            sqlite3.Error: SQLite cannot open it (the thread is stopped).
        """
        self = cls()
        self._thread.start()

        def connect() -> None:
            conn = sqlite3.connect(database, uri=uri, isolation_level=None, check_same_thread=False)
            if text_factory is not None:
                conn.text_factory = text_factory
            self._conn = conn

        with anyio.CancelScope(shield=True):
            try:
                await self._call(connect)
            except BaseException:
                self._closed = True
                self._jobs.put(None)
                raise
        return self

    def _serve(self) -> None:
        """The connection's thread: run the queued calls in order until told to stop."""
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, loop, to = job
            try:
                if self._busy_now != self._busy_want and self._conn is not None:
                    self._set_busy(self._conn, self._busy_want)
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the caller, whatever it is
                result, error = None, exc
            try:
                if loop is not None:
                    loop.call_soon_threadsafe(_settle, to, result, error)
                else:
                    to(result, error)  # trio: a report function
            except RuntimeError:  # the caller's event loop is closed: nobody waits any more
                pass
            del job, fn, args, loop, to, result, error

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on this connection (``BEGIN`` without its end)."""
        return self._conn is not None and self._conn.in_transaction

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise sqlite3.ProgrammingError(_CLOSED)
        loop = _groupcommit._running_loop()  # (asyncio's C lookup once asyncio is imported)
        if loop is None:
            return await self._call_trio(fn, args)
        fut: asyncio.Future[T] = loop.create_future()
        self._inflight += 1
        self._jobs.put((fn, args, loop, fut))
        try:
            return await fut
        except sys.modules["asyncio"].CancelledError:  # (asyncio runs: it is imported)
            # the call still runs: wait (shielded) until the thread has passed it, so the
            # caller never returns while its statement runs on
            if not fut.done() or fut.cancelled():
                with anyio.CancelScope(shield=True):
                    await self._call(_nothing)
            raise
        finally:
            self._inflight -= 1

    async def _call_trio(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        import outcome
        import trio

        token = trio.lowlevel.current_trio_token()
        task = trio.lowlevel.current_task()

        def report(result: Any, exc: BaseException | None) -> None:
            got = outcome.Value(result) if exc is None else outcome.Error(exc)
            try:
                token.run_sync_soon(trio.lowlevel.reschedule, task, got)
            except trio.RunFinishedError:  # the run ended: nobody waits any more
                pass

        self._inflight += 1
        self._jobs.put((fn, args, None, report))

        def refuse_abort(_: Any) -> trio.lowlevel.Abort:
            return trio.lowlevel.Abort.FAILED  # the cancel is delivered after the call

        try:
            result: T = await trio.lowlevel.wait_task_rescheduled(refuse_abort)
        finally:
            self._inflight -= 1
        return result

    def idle(self) -> sqlite3.Connection | None:
        """The ``sqlite3`` connection itself, to run a statement on the caller's own thread
        (the event loop's), when that cannot meet the connection's thread: no call queued or
        running there, no transaction open, not closed; else None. The caller must be done
        with it before its next ``await`` (no call can be queued meanwhile)."""
        conn = self._conn
        if self._inflight or self._closed or conn is None or conn.in_transaction:
            return None
        return conn

    def direct(self) -> sqlite3.Connection | None:
        """:meth:`idle`'s connection at ``busy_timeout`` 0: a statement run on the caller's
        thread never waits for another connection's lock (SQLITE_BUSY at once instead). The
        thread sets its own timeout back before its next call, so a run of statements on the
        caller's thread pays no ``PRAGMA`` each (measured: two of them cost ~40 µs of CPU per
        lone commit on the loop)."""
        conn = self.idle()
        if conn is not None and self._busy_now != 0:
            self._set_busy(conn, 0)
        return conn

    def _set_busy(self, conn: sqlite3.Connection, ms: int) -> None:
        conn.execute(f"PRAGMA busy_timeout={ms}").close()
        self._busy_now = ms

    async def set_busy_timeout(self, ms: int) -> None:
        """The connection's ``busy_timeout`` in milliseconds for the calls on its thread."""
        self._busy_want = ms
        await self._call(_nothing)  # the thread sets it before it runs this call

    async def execute_timed(self, sql: str, params: Sequence[Any] = ()) -> float:
        """Run one statement, discarding any rows; return how long it took on the thread
        (seconds: SQLite's work and its fsync, without the trips between the threads)."""
        return await self._call(_execute_timed, self._open(), sql, params)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement, discarding any rows."""
        await self._call(_execute, self._open(), sql, params)

    async def execute_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Run one statement and return all its rows."""
        return await self._call(_fetchall, self._open(), sql, params)

    async def changes(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement and return the number of rows it changed."""
        return await self._call(_changes, self._open(), sql, params)

    async def executescript(self, script: str) -> None:
        """Run several statements (``sqlite3``'s ``executescript``)."""
        await self._call(self._open().executescript, script)

    async def insert_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """``BEGIN IMMEDIATE``, ``sql`` once per row, ``COMMIT``: one transaction, in one
        call on the thread (rolled back there if any row fails)."""
        await self._call(_insert_many, self._open(), sql, list(rows))

    def _open(self) -> sqlite3.Connection:
        if self._conn is None or self._closed:
            raise sqlite3.ProgrammingError(_CLOSED)
        return self._conn

    async def close(self) -> None:
        """Close the connection after the calls queued before, and stop its thread.
        Shielded, so closing from a cancelled task still closes it. Closing twice is
        harmless."""
        if self._closed:
            return
        conn = self._conn
        with anyio.CancelScope(shield=True):
            try:
                if conn is not None:
                    await self._call(conn.close)
            finally:
                self._closed = True
                self._jobs.put(None)


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():  # its caller was cancelled
        return
    if exc is None:
        fut.set_result(result)
    else:
        fut.set_exception(exc)


def _nothing() -> None:
    return None


def _execute(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> None:
    conn.execute(sql, params).close()


def _execute_timed(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> float:
    t = time.perf_counter()
    conn.execute(sql, params).close()
    return time.perf_counter() - t


def _fetchall(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    cur = conn.execute(sql, params)
    try:
        return cur.fetchall()
    finally:
        cur.close()


def _changes(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
    cur = conn.execute(sql, params)
    try:
        return int(cur.rowcount)
    finally:
        cur.close()


def _insert_many(conn: sqlite3.Connection, sql: str, rows: list[Sequence[Any]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
