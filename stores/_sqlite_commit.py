"""The commit path of ``SqliteStore``: a batch of appends as multi-row ``INSERT``s, and what
a rejected one means; optionally run on the event loop's own thread (``commit_on_loop``).

Every other statement of the store goes through the writer connection's own thread
(``_sqlite_conn``), which runs it while the event loop goes on; the commit of a lone append
(a batch of one request: one actor, or actors taking turns) can instead run on a plain
``sqlite3`` connection of its own on the loop's thread. That saves the two thread switches
per commit (measured: about a quarter of a sequential ``ctx.call`` on SQLite) and blocks the
loop for the commit's fsync, and now and then for a WAL checkpoint: docs/tuning.md says when
that is a good trade. A batch of several requests always goes to the thread, where the next
batch's actors keep running during the fsync. The direct connection is used only when the
writer has no transaction open, so a commit never lands inside another statement's
transaction; both connections have the same ``synchronous`` and ``busy_timeout`` settings,
so a commit is as durable on either.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from actorlog.store import (
    CorruptEntryError,
    EntryRow,
    SequenceConflictError,
    StoreCorruptError,
    StoreError,
)

from ._groupcommit import Request
from ._sql import ENTRY_COLS, entry_values, flat_entry_values
from ._sqlite_schema3 import BY_PK_MESSAGE_ID

if TYPE_CHECKING:
    from ._sqlite_conn import Connection

__all__ = ["MAX_ROWS_PER_STATEMENT", "Append", "SqliteCommits"]

# SQLite >= 3.32 allows 32766 bound variables per statement; 8 per row.
MAX_ROWS_PER_STATEMENT = 4000

#: the multi-row INSERT of n rows, by n (built once per size: the SQL text, and its hash that
#: the sqlite3 module's statement cache looks up, are not rebuilt on every commit)
_INSERTS: dict[int, str] = {}


def _insert_sql(n: int) -> str:
    sql = _INSERTS.get(n)
    if sql is None:
        sql = f"INSERT INTO entries ({ENTRY_COLS}) VALUES " + ",".join(["(?,?,?,?,?,?,?,?)"] * n)
        if len(_INSERTS) < 512:  # bounded: sizes beyond are built each time
            _INSERTS[n] = sql
    return sql


#: one append request: actor id, the seq it expects last, its rows
Append = tuple[str, int, Sequence[EntryRow]]


class SqliteCommits:
    """The commit methods of ``SqliteStore`` (through the few members it declares)."""

    #: a plain sqlite3 connection for commits on the loop's thread (``commit_on_loop``)
    _loop_conn: sqlite3.Connection | None = None
    batch_sizes: list[int]
    path: str
    layout: int  # the file's layout (FORMAT.md section 6): 3, or 2 for an older file

    if TYPE_CHECKING:

        def _writer(self) -> Connection: ...
        def _error(self, what: str, exc: Exception) -> Exception: ...

    def _open_loop_conn(self, path: str, pragmas: Sequence[str]) -> None:
        """Open the direct connection (after the schema exists) with the writer's
        ``pragmas`` (its lock wait and its durability)."""
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        try:
            for pragma in pragmas:
                conn.execute(pragma)
        except BaseException:
            conn.close()
            raise
        self._loop_conn = conn

    def _close_loop_conn(self) -> None:
        conn, self._loop_conn = self._loop_conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    async def _commit(self, batch: Sequence[Request[Append]]) -> None:
        """Commit a batch: one multi-row INSERT (one transaction) per chunk of requests."""
        self.batch_sizes.append(len(batch))
        if len(self.batch_sizes) > 1024:
            del self.batch_sizes[:512]
        chunk: list[Request[Append]] = []
        n = 0
        for req in batch:
            size = len(req.item[2])
            if chunk and n + size > MAX_ROWS_PER_STATEMENT:
                await self._commit_chunk(chunk)
                chunk, n = [], 0
            chunk.append(req)
            n += size
        if chunk:
            await self._commit_chunk(chunk)

    async def _commit_chunk(self, chunk: Sequence[Request[Append]]) -> None:
        w = self._writer()
        rows = [row for req in chunk for row in req.item[2]]
        try:
            if len(rows) <= MAX_ROWS_PER_STATEMENT:
                sql = _insert_sql(len(rows))
                params = flat_entry_values(rows)
                direct = self._loop_conn
                if direct is not None and len(chunk) == 1 and not w.in_transaction:
                    direct.execute(sql, params)  # on the event loop's thread: no hop
                else:
                    await w.execute(sql, params)
            else:  # one oversized request: an explicit transaction, in one call
                await w.insert_many(
                    f"INSERT INTO entries ({ENTRY_COLS}) VALUES (?,?,?,?,?,?,?,?)",
                    [entry_values(r) for r in rows],
                )
        except sqlite3.IntegrityError as exc:
            if len(chunk) == 1:
                actor_id, expected, _ = chunk[0].item
                chunk[0].error = await self._conflict(actor_id, expected, exc, chunk[0].item[2])
                return
            # Someone in the batch lost a race; find out who by committing one by one.
            for req in chunk:
                await self._commit_chunk([req])
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            if len(chunk) > 1 and not isinstance(exc, sqlite3.Error):
                for req in chunk:  # one request's bad value must not fail the others
                    await self._commit_chunk([req])
                return
            err = self._error("commit", exc)
            err.__cause__ = exc
            for req in chunk:
                req.error = err

    async def _conflict(
        self,
        actor_id: str,
        expected: int,
        exc: sqlite3.IntegrityError,
        rows: Sequence[EntryRow],
    ) -> StoreError | CorruptEntryError:
        """The error for a rejected append: a conflict, unless the actor's summary row
        (``actors.last_seq``, which the append trigger checks) disagrees with the log itself,
        which is damage (one runtime per file: nobody else writes); or unless the log ends
        where the append expects it to: then no seq was taken, and what refused the rows is
        a damaged index (the unique message-id index holding an id no row has, say), which
        is ``StoreCorruptError`` naming the file, unless the rows do not continue the log or
        repeat a message id the log's rows (read past that index) or the rows themselves
        hold: that is the conflict the contract names."""
        found = await self._last_seq(actor_id)
        try:
            got = await self._writer().execute_fetchall(
                "SELECT max(seq) FROM entries WHERE actor_id = ?", (actor_id,)
            )
            real = got[0][0] if got else None
        except (sqlite3.Error, ValueError):
            real = None
        if found is not None and type(real) in (int, type(None)) and found != (real or 0):
            return CorruptEntryError(
                actor_id,
                found,
                "seq chain",
                f"the actor's summary (actors.last_seq) says {found} but the log ends at seq "
                f"{real or 0}; nothing was written",
            )
        if (
            found == expected
            and type(real) in (int, type(None))
            and (real or 0) == expected
            and not await self._explains(actor_id, expected, rows)
        ):
            err = StoreCorruptError(
                self.path,
                f"SQLite refused an append to actor {actor_id!r} after seq {expected}, where "
                f"its log ends, with {exc}: an index disagrees with the rows (run actorlog "
                "verify, which runs SQLite's integrity check)",
            )
            err.__cause__ = exc
            return err
        return SequenceConflictError(actor_id, expected, found)

    async def _explains(self, actor_id: str, expected: int, rows: Sequence[EntryRow]) -> bool:
        """Whether ``rows`` themselves explain their refusal at the log's end: their seqs do
        not continue it, or a message id repeats (within them, or one a row of the log has,
        read through the primary key's index, never through the message-id index)."""
        if [r.seq for r in rows] != list(range(expected + 1, expected + 1 + len(rows))):
            return True
        ids = [r.message_id for r in rows if r.message_id is not None]
        if len(set(ids)) != len(ids):
            return True
        for message_id in ids:
            try:
                found = await self._writer().execute_fetchall(
                    BY_PK_MESSAGE_ID
                    if self.layout == 3
                    else "SELECT 1 FROM entries INDEXED BY sqlite_autoindex_entries_1 "
                    "WHERE actor_id = ? AND message_id = ? LIMIT 1",
                    (actor_id, message_id),
                )
            except sqlite3.Error:
                return True  # cannot tell: keep the conflict
            if list(found):
                return True
        return False

    async def _last_seq(self, actor_id: str) -> int | None:
        try:
            rows = await self._writer().execute_fetchall(
                "SELECT last_seq FROM actors WHERE actor_id = ?", (actor_id,)
            )
        except sqlite3.Error:
            return None
        return rows[0][0] if rows and type(rows[0][0]) is int else None
