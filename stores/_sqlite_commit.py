"""The commit path of ``SqliteStore``: a batch of appends as multi-row ``INSERT``s, and what
a rejected one means; where a lone append's commit runs (``commit_on_loop``).

Every statement of the store goes through the writer connection's own thread
(``_sqlite_conn``), which runs it while the event loop goes on, except, with
``commit_on_loop``, the commit of a lone append (a batch of one request: one actor's
sequential calls, or actors taking turns). That one can run on the event loop's own thread,
on the writer connection itself, while its thread has nothing queued or running and no
transaction is open (``Connection.idle``): the two thread switches per commit go (measured on
the 2-core build machine: about 250 µs of CPU and 110-190 µs of wall time per commit, more
than SQLite's own commit with its fsync), and the loop waits for the commit, fsync included.
Such a commit is the group committer's ``commit_now`` (:meth:`SqliteCommits._commit_now`):
it has no await, so it needs no cancel scope, and it runs at ``busy_timeout`` 0, set once
for a run of them (``Connection.direct``), not by a ``PRAGMA`` pair around each (measured:
the pair cost ~40 µs of CPU per commit, the scope ~10). In a format-4 file the rows go
straight into ``log`` once the keys of their actors and tags are known (``LogKeys``:
the view's insert trigger cost a two-row commit ~15 µs of CPU).

When (``commit_on_loop``):

* ``False``: never; ``True``: every lone append whenever the writer is idle;
* ``"auto"`` (the default): a lone append whenever the writer is idle and the store's
  running mean of lone commit times is at most ``LOOP_LIMIT``: each lone commit, measured
  where it ran (on the thread: the statement there, without the trips), weighs
  ``1/LOOP_WEIGHT`` in the mean. The mean starts at ``2 * LOOP_LIMIT`` (nothing measured:
  the first lone commits go to the thread, about seven fast ones before one runs on the
  loop). A slow stretch (a slow disk; a write lock another connection holds: never waited
  for on the loop, see ``_commit_here``) pushes the mean over the
  limit within a commit or two, and the lone commits go back to the thread until it is
  fast again; a lone slow commit (a WAL checkpoint) costs at most a few commits on the
  thread.

A batch of several requests always goes to the thread, where the next batch's actors keep
running during its fsync; while lone commits run on the loop, a new leader lets the other
ready tasks run once before it takes the queue (``gather``), so appenders woken together
still share a transaction. The statement, the transaction and the connection (its
``synchronous`` setting) are the same on either thread, so a commit is as durable on either.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from actorlog.store import (
    ActorRow,
    AuditRow,
    ConfigurationError,
    CorruptEntryError,
    EntryRow,
    SequenceConflictError,
    StoreCorruptError,
    StoreError,
)

from ._audit import SqliteAudit
from ._groupcommit import GroupCommitter, Request
from ._sql import ENTRY_COLS, entry_values, flat_entry_values
from ._sqlite_schema3 import (
    BY_PK_MESSAGE_ID,
    BY_PK_MESSAGE_ID5,
    KIND_CODES,
    LAST_SEQ5,
    LOG5_COLS,
    LOG_COLS,
    MAX_ACTOR_KEY,
    MAX_SEQ,
)

if TYPE_CHECKING:
    from ._sqlite_conn import Connection

__all__ = [
    "LOOP_LIMIT",
    "LOOP_WEIGHT",
    "MAX_ROWS_PER_STATEMENT",
    "RETURNING",
    "Append",
    "Registration",
    "SqliteCommits",
    "insert_sql",
    "mark_inserted",
]

#: ``commit_on_loop="auto"``: a lone commit runs on the loop's thread while the running mean
#: of lone commit times (seconds, where they ran) is at most LOOP_LIMIT; a new commit weighs
#: 1/LOOP_WEIGHT in that mean
LOOP_LIMIT = 0.001
LOOP_WEIGHT = 8

# SQLite >= 3.32 allows 32766 bound variables per statement; 8 per row.
MAX_ROWS_PER_STATEMENT = 4000

#: an append request's item: actor id, the seq it expects last, its rows
_Item = tuple[str, int, Sequence[EntryRow]]

#: the multi-row INSERT of n rows straight into ``log``, by n (built once per size), in a
#: file of format 4 and of format 5
_LOG_INSERTS: dict[int, str] = {}
_LOG5_INSERTS: dict[int, str] = {}

#: a checksum's range (unsigned 32 bits) and the bit that makes it negative when stored
_U32, _SIGN = 1 << 32, 1 << 31


def _multi_row_sql(cache: dict[int, str], head: str, n: int, width: int = 8) -> str:
    """``head`` and n rows of ``width`` parameters, from ``cache`` (built once per size: the
    SQL text, and its hash that the sqlite3 module's statement cache looks up, are not
    rebuilt on every commit)."""
    sql = cache.get(n)
    if sql is None:
        sql = head + ",".join(["(" + ",".join("?" * width) + ")"] * n)
        if len(cache) < 512:  # bounded: sizes beyond are built each time
            cache[n] = sql
    return sql


_LOG_HEAD = f"INSERT INTO log ({LOG_COLS}) VALUES "


def log_insert_sql(n: int, layout: int = 4) -> str:
    if layout >= 5:
        return _multi_row_sql(_LOG5_INSERTS, _LOG5_HEAD, n, 7)
    return _multi_row_sql(_LOG_INSERTS, _LOG_HEAD, n)


_LOG5_HEAD = f"INSERT INTO log ({LOG5_COLS}) VALUES "


def lookup(unknown: tuple[list[str], list[str]]) -> tuple[str, list[str]]:
    """The query of the keys of these actor ids and tags: rows ``(0, actor_id, id)`` and
    ``(1, tag, id)``, found as the view's insert trigger finds them."""
    actors, tags = unknown
    sql = (
        "SELECT 0, actor_id, id FROM actors WHERE actor_id IN ("
        + ",".join("?" * len(actors))
        + ") UNION ALL SELECT 1, tag, id FROM tags WHERE tag IN ("
        + ",".join("?" * len(tags))
        + ")"
    )
    return sql, [*actors, *tags]


class LogKeys(SqliteAudit):
    """Format 4's appends straight into ``log`` (FORMAT.md section 6, "Format 4"): the
    file's keys of actor ids and tags, known to the store, so that a commit need not go
    through the view ``entries`` (``_actor_keys`` and ``_tag_keys``: ``_init_commits``).

    A format-3/4 file keeps the log in ``log``, each row keyed by its actor's integer key
    (``actors.id``) and its tag's (``tags.id``), the kind as a code and the checksum as a
    signed 32-bit integer; the view ``entries`` shows them as text, and its ``INSTEAD OF
    INSERT`` trigger turns a row written as text into those columns (inserting a new tag
    first), at the cost of two lookups, a tag insert that does nothing and the trigger
    program per row. In a format-4 file the store inserts its rows into ``log`` itself, with
    the values the trigger would store (the same record bytes:
    tests/stores/test_sqlite_log_keys.py), when it knows the key of each row's actor and
    tag; otherwise (an actor's or a tag's first append since the store opened, a value the
    runtime never writes) through the view as before, and then it reads the new keys as the
    trigger does. The checks stay in the file's triggers on ``log``: the seq chain
    (``log_contiguous``) and the summary (``log_summary``).

    A known key is always right: a tag's never changes (tags are never deleted), and an
    actor's changes only if its ``actors`` row is deleted (``delete_actor``, which forgets
    every actor's key) and made again; the store holds the file's write lock, so no other
    writer deletes one. A refused commit forgets the keys of its actors as well.
    """

    _actor_keys: dict[str, int]
    _tag_keys: dict[str, int]

    def _log_values(self, items: Sequence[_Item], layout: int = 4) -> list[Any] | None:
        """The parameters of the rows of ``items`` as columns of ``log``, as the view's
        insert trigger makes them, or None if a key is not known yet or a value is not one
        the runtime writes (then the view stores them, with its rules for anything). In a
        format-5 file the row's key is one column, the rowid ``actor << 32 | seq``."""
        five = layout >= 5
        actors, tags, kinds = self._actor_keys, self._tag_keys, KIND_CODES
        out: list[Any] = []
        add = out.extend
        try:
            for actor_id, _, rows in items:
                actor = actors[actor_id]
                if five and not 0 < actor <= MAX_ACTOR_KEY:
                    return None
                base = actor << 32
                for r in rows:
                    c, seq = r.checksum, r.seq
                    if type(c) is not int or not 0 <= c < _U32:
                        return None
                    if not five:
                        add((actor, seq))
                    elif type(seq) is int and 0 < seq <= MAX_SEQ:
                        add((base + seq,))
                    else:
                        return None
                    add(
                        (
                            kinds[r.kind],
                            tags[r.type_tag],
                            r.ref,
                            r.message_id,
                            r.payload,
                            c - _U32 if c >= _SIGN else c,
                        )
                    )
        except Exception:  # a key not known yet, a value that is not a key: the view's rules
            return None
        return out

    def _unknown(self, items: Sequence[_Item]) -> tuple[list[str], list[str]] | None:
        """The actor ids and tags of ``items`` (text only) whose keys are not known."""
        actors, tags = self._actor_keys, self._tag_keys
        new_actors: set[str] = set()
        new_tags: set[str] = set()
        for actor_id, _, rows in items:
            if type(actor_id) is str and actor_id not in actors:
                new_actors.add(actor_id)
            for r in rows:
                if type(r.type_tag) is str and r.type_tag not in tags:
                    new_tags.add(r.type_tag)
        if not new_actors and not new_tags:
            return None
        return sorted(new_actors), sorted(new_tags)

    def _learn(self, found: Sequence[Any]) -> None:
        """Keep the keys :func:`lookup` read (integers only: anything else, damage, is left
        to the view, which reads it for every row)."""
        for which, name, key in found:
            if type(name) is str and type(key) is int:
                (self._tag_keys if which else self._actor_keys)[name] = key

    def _forget(self, items: Sequence[_Item]) -> None:
        """Forget the keys of the actors of ``items`` (a refused commit: the next try goes
        through the view, and reads them again)."""
        for actor_id, _, _ in items:
            if type(actor_id) is str:  # every key is one
                self._actor_keys.pop(actor_id, None)

    async def delete_actor(self, actor_id: str, detail: str) -> AuditRow:
        # its ``actors`` row goes, and a new actor may get its key: every key is read again
        self._actor_keys.clear()
        try:
            return await super().delete_actor(actor_id, detail)
        finally:
            self._actor_keys.clear()


#: the multi-row INSERT of n rows, by n (built once per size: the SQL text, and its hash that
#: the sqlite3 module's statement cache looks up, are not rebuilt on every commit)
_INSERTS: dict[int, str] = {}


_ENTRIES_HEAD = f"INSERT INTO entries ({ENTRY_COLS}) VALUES "


def _insert_sql(n: int) -> str:
    return _multi_row_sql(_INSERTS, _ENTRIES_HEAD, n)


#: one append request: actor id, the seq it expects last, its rows
Append = tuple[str, int, Sequence[EntryRow]]


def _rows(chunk: Sequence[Request[Append]]) -> list[EntryRow]:
    return [row for req in chunk for row in req.item[2]]


class SqliteCommits(LogKeys):
    """The commit methods of ``SqliteStore`` (through the few members it declares)."""

    commit_on_loop: bool | Literal["auto"]
    #: the running mean of lone commit times (seconds; nothing measured yet: slow)
    _commit_mean = 2 * LOOP_LIMIT
    #: commits that ran on the event loop's thread (telemetry, tests)
    _loop_commits = 0
    _committer: GroupCommitter[Append]
    _w: Connection | None
    batch_sizes: list[int]
    path: str
    layout: int  # the file's layout (FORMAT.md section 6): 5, 4 or 3, or 2 for an older file

    if TYPE_CHECKING:

        def _writer(self) -> Connection: ...
        def _error(self, what: str, exc: Exception) -> Exception: ...

    def _init_commits(self, commit_on_loop: bool | Literal["auto"]) -> None:
        """The group committer and the rest of the commit path's state (``__init__``)."""
        # gather: appenders woken together share a batch (measured: +5-10% steps/s at 10
        # and 100 actors, fuller batches). Only while batches are shared on the writer's
        # thread (a lone appender's extra loop turn cost sequential calls ~15%); always
        # while lone commits run on the loop, where a commit without an await would end
        # group commit (commit_on_loop=True; "auto" switches it, ``_took``)
        self._committer = GroupCommitter(
            self._commit,
            gather="always" if commit_on_loop is True else "when_shared",
            commit_now=self._commit_now,
        )
        self.batch_sizes = []  # recent commit batch sizes (bounded), for telemetry
        self._actor_keys, self._tag_keys = {}, {}  # read from the file (``LogKeys``)

    def _loop_ok(self) -> bool:
        """Whether a lone commit may run on the loop's thread (if the writer is idle)."""
        mode = self.commit_on_loop
        return mode is True or (mode == "auto" and self._commit_mean <= LOOP_LIMIT)

    def _took(self, seconds: float) -> None:
        """Note how long a lone commit took (seconds, where it ran)."""
        was = self._commit_mean <= LOOP_LIMIT
        self._commit_mean += (seconds - self._commit_mean) / LOOP_WEIGHT
        now = self._commit_mean <= LOOP_LIMIT
        if self.commit_on_loop == "auto" and was != now:
            # on the loop a commit has no await that others could join during: the leader
            # lets the ready tasks run once first (as with commit_on_loop=True)
            self._committer.gather = "always" if now else "when_shared"

    def _commit_here(self, conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> bool:
        """Commit a lone append on the event loop's thread, on the idle writer connection
        ``conn`` (at ``busy_timeout`` 0: ``Connection.direct``), without waiting for another
        connection's write lock (the loop must not stall for ``busy_timeout``): False,
        nothing written, if SQLite refuses the statement: the caller commits on the writer's
        thread, which waits for a lock (the mean is pushed over the limit, so the next lone
        commits go there too) and reports any other refusal as it does for every commit
        (the statement is atomic: it wrote nothing, and runs again there)."""
        t = time.perf_counter()
        try:
            conn.execute(sql, params).close()
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                self._took(2 * LOOP_LIMIT * LOOP_WEIGHT)  # over the limit at once
            return False
        except (sqlite3.Error, ValueError, OverflowError):
            return False
        self._took(time.perf_counter() - t)
        self._loop_commits += 1
        return True

    def _commit_now(self, req: Request[Append]) -> bool:
        """``GroupCommitter``'s synchronous try for a lone request: commit it on the event
        loop's thread if ``commit_on_loop`` allows and the writer is idle (True: committed);
        else False, nothing done (the request goes through :meth:`_commit`). No await, so
        nothing can interrupt it, and it needs no cancel scope."""
        w = self._w
        rows = req.item[2]
        if w is None or not self._loop_ok() or len(rows) > MAX_ROWS_PER_STATEMENT:
            return False
        try:
            conn = w.direct()
        except sqlite3.Error:  # its PRAGMA refused: the thread's path reports what is wrong
            return False
        if conn is None:
            return False
        chunk = (req,)
        sql, params, unknown = self._statement(chunk, len(rows))
        if not self._commit_here(conn, sql, params):
            self._forget([req.item])
            return False
        self._note_batch(1)
        if unknown:
            with contextlib.suppress(sqlite3.Error):
                self._learn(conn.execute(*lookup(unknown)).fetchall())
        return True

    def _note_batch(self, n: int) -> None:
        self.batch_sizes.append(n)
        if len(self.batch_sizes) > 1024:
            del self.batch_sizes[:512]

    async def _commit(self, batch: Sequence[Request[Append]]) -> None:
        """Commit a batch: one multi-row INSERT (one transaction) per chunk of requests."""
        self._note_batch(len(batch))
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

    def _statement(
        self, chunk: Sequence[Request[Append]], n: int
    ) -> tuple[str, list[Any], tuple[list[str], list[str]] | None]:
        """The multi-row INSERT of ``chunk``'s ``n`` rows and its parameters: in a format-4
        file straight into ``log`` when the file's keys of every actor and tag are known
        (else through the view ``entries``, and the third item names the actor ids and
        tags whose keys to read once it has committed: :func:`lookup`)."""
        if self.layout >= 4:
            items = [req.item for req in chunk]
            params = self._log_values(items, self.layout)
            if params is not None:
                return log_insert_sql(n, self.layout), params, None
            return _insert_sql(n), flat_entry_values(_rows(chunk)), self._unknown(items)
        return _insert_sql(n), flat_entry_values(_rows(chunk)), None

    async def _commit_chunk(self, chunk: Sequence[Request[Append]]) -> None:
        w = self._writer()
        rows = _rows(chunk)
        unknown = None
        try:
            if len(rows) <= MAX_ROWS_PER_STATEMENT:
                sql, params, unknown = self._statement(chunk, len(rows))
                if len(chunk) > 1:
                    await w.execute(sql, params)
                else:
                    self._took(await w.execute_timed(sql, params))
            else:  # one oversized request: an explicit transaction, in one call
                await w.insert_many(
                    f"INSERT INTO entries ({ENTRY_COLS}) VALUES (?,?,?,?,?,?,?,?)",
                    [entry_values(r) for r in rows],
                )
        except sqlite3.IntegrityError as exc:
            self._forget([req.item for req in chunk])
            if len(chunk) == 1:
                actor_id, expected, _ = chunk[0].item
                chunk[0].error = await self._conflict(actor_id, expected, exc, chunk[0].item[2])
                return
            # Someone in the batch lost a race; find out who by committing one by one.
            for req in chunk:
                await self._commit_chunk([req])
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            self._forget([req.item for req in chunk])
            if len(chunk) > 1 and not isinstance(exc, sqlite3.Error):
                for req in chunk:  # one request's bad value must not fail the others
                    await self._commit_chunk([req])
                return
            err = self._error("commit", exc)
            err.__cause__ = exc
            for req in chunk:
                req.error = err
        else:
            if unknown is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._learn(await w.execute_fetchall(*lookup(unknown)))

    async def _conflict(
        self,
        actor_id: str,
        expected: int,
        exc: sqlite3.IntegrityError,
        rows: Sequence[EntryRow],
    ) -> StoreError | CorruptEntryError | ConfigurationError:
        """The error for a rejected append: a conflict, unless the actor's summary row
        (``actors.last_seq``, which the append trigger checks) disagrees with the log itself,
        which is damage (one runtime per file: nobody else writes); or unless the log ends
        where the append expects it to: then no seq was taken, and what refused the rows is
        a damaged index (the unique message-id index holding an id no row has, say), which
        is ``StoreCorruptError`` naming the file, unless the rows do not continue the log or
        repeat a message id the log's rows (read past that index) or the rows themselves
        hold: that is the conflict the contract names. In a format-5 file an actor whose key
        is beyond the format's (an ``actors`` row given its ``id`` by hand) can hold no
        entry: bad input, ``ConfigurationError`` (FORMAT.md [F24]), never damage."""
        if self.layout >= 5:
            key = await self._actor_key(actor_id)
            if type(key) is int and key > MAX_ACTOR_KEY:
                return ConfigurationError(
                    f"a SQLite file of format 5 holds actor keys 1 to {MAX_ACTOR_KEY}: actor "
                    f"{actor_id!r} has key {key} (its actors row was given that id by hand) "
                    "and cannot hold entries; nothing was written"
                )
        found = await self._last_seq(actor_id)
        try:
            got = await self._writer().execute_fetchall(
                LAST_SEQ5
                if self.layout >= 5
                else "SELECT max(seq) FROM entries WHERE actor_id = ?",
                (actor_id,),
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
                    BY_PK_MESSAGE_ID5
                    if self.layout >= 5
                    else BY_PK_MESSAGE_ID
                    if self.layout >= 3
                    else "SELECT 1 FROM entries INDEXED BY sqlite_autoindex_entries_1 "
                    "WHERE actor_id = ? AND message_id = ? LIMIT 1",
                    (actor_id, message_id),
                )
            except sqlite3.Error:
                return True  # cannot tell: keep the conflict
            if list(found):
                return True
        return False

    async def _actor_key(self, actor_id: str) -> object:
        try:
            rows = await self._writer().execute_fetchall(
                "SELECT id FROM actors WHERE actor_id = ?", (actor_id,)
            )
        except sqlite3.Error:
            return None
        return rows[0][0] if rows else None

    async def _last_seq(self, actor_id: str) -> int | None:
        try:
            rows = await self._writer().execute_fetchall(
                "SELECT last_seq FROM actors WHERE actor_id = ?", (actor_id,)
            )
        except sqlite3.Error:
            return None
        return rows[0][0] if rows and type(rows[0][0]) is int else None


# Registering new actors: one ``INSERT OR IGNORE`` per batch of registrations.
# ``SqliteStore.register_actor`` queues each new actor's row for a group commit (spawning many
# new actors shares one transaction). The statement returns the ids it inserted (``RETURNING``,
# SQLite 3.35 and later), so a registration knows that its call created the row
# (``ActorRow.created``): the store held nothing of that actor, and the runtime starts it
# without recovery's reads. With an older SQLite no row is marked, and every registration reads
# its row back as before.

#: whether this SQLite has ``INSERT ... RETURNING`` (3.35.0)
RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)


class Registration:
    """One queued registration; ``inserted`` once its batch's statement inserted its row."""

    __slots__ = ("actor_id", "actor_type", "at", "inserted")

    def __init__(self, actor_id: str, actor_type: str, at: float) -> None:
        self.actor_id = actor_id
        self.actor_type = actor_type
        self.at = at
        self.inserted = False

    def row(self) -> ActorRow:
        """The row this registration inserted, as ``get_actor`` reads it (an empty log)."""
        return ActorRow(self.actor_id, self.actor_type, 0, 0, 0, 0, self.at, created=True)


def insert_sql(chunk: Sequence[Registration]) -> tuple[str, list[Any]]:
    """The statement inserting ``chunk``'s rows (returning the ids inserted, if it can)."""
    sql = "INSERT OR IGNORE INTO actors (actor_id, actor_type, created_at) VALUES " + ",".join(
        ["(?,?,?)"] * len(chunk)
    )
    values = [v for r in chunk for v in (r.actor_id, r.actor_type, r.at)]
    return (sql + " RETURNING actor_id" if RETURNING else sql), values


def mark_inserted(chunk: Sequence[Registration], rows: Sequence[Any]) -> None:
    """Mark the registrations whose rows the statement returned. Of two registrations of
    one id in a batch, the first inserted it (the rows are inserted in order)."""
    inserted = {r[0] for r in rows}
    for reg in chunk:
        if reg.actor_id in inserted:
            inserted.discard(reg.actor_id)
            reg.inserted = True
