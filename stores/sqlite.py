"""The embedded default store: one SQLite file in WAL mode, group commit, real fsync.

Schema and guarantees are in ``docs/FORMAT.md`` ("SQLite schema"). Highlights:

* Appends from every actor that arrive while a commit is in flight share the next
  transaction: one multi-row ``INSERT`` in autocommit mode, which SQLite runs as one atomic
  transaction, so one hop to the writer connection's thread and one fsync per batch.
* The conditional append is enforced *inside* the database by a ``BEFORE INSERT`` trigger
  (each row's seq must be the actor's last seq + 1), so a second process writing the same
  actor's log gets a constraint error, never an interleaved log.
* ``durability="fsync"`` (default) is ``synchronous=FULL``: a commit is on disk before
  ``append`` returns. ``durability="survive-process-crash"`` is ``synchronous=NORMAL``: an
  acknowledged append survives the process being killed, but the last transactions may be
  lost if the machine loses power or the OS crashes.

One runtime per file: a writable store holds an exclusive OS lock (``flock``) on
``<file>-actorlog.lock`` from ``open`` to ``close`` (the kernel drops it when the process
dies); a second writer gets :class:`~actorlog.StoreLockedError` naming the holder (pid,
host, since). ``read_only`` openers take no lock. Windows has no ``fcntl``: there the lock is
not taken (documented in docs/recovery.md).

Every column read is type-checked (``actorlog.store.entry_row`` and friends), text that is
not valid UTF-8 included; SQLite's own "database disk image is malformed" is
:class:`~actorlog.StoreCorruptError` naming the file.

Runs on asyncio and trio alike: each connection is the stdlib ``sqlite3`` on a thread of
its own (``_sqlite_conn``), which answers whichever anyio backend asked.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import anyio
from actorlog.store import (
    FORMAT_VERSION,
    ActorRow,
    ConfigurationError,
    EntryRow,
    EventRow,
    SequenceConflictError,
    SnapshotInfo,
    SnapshotRow,
    StoreCapabilities,
    StoreClosedError,
    StoreCorruptError,
    StoreUnavailableError,
    actor_row,
    event_row,
    shown,
    snapshot_data,
    snapshot_info,
    validate_seconds,
)

from . import _sqlite_pack as _pack, _writelock
from ._groupcommit import GroupCommitter, Request
from ._sql import (
    ACTOR_COLS,
    SNAPSHOT_INFO_COLS,
    snapshot_values,
)
from ._sqlite_commit import (
    MAX_ROWS_PER_STATEMENT,
    Registration,
    SqliteCommits,
    insert_sql,
    mark_inserted,
)
from ._sqlite_compact import SqliteCompaction
from ._sqlite_conn import Connection
from ._sqlite_schema import (
    PRELUDE,
    SCHEMA,
    SCHEMA3,
    SCHEMA5,
    UNFINISHED,
    check_version,
    file_layout,
)
from ._sqlite_schema3 import MAX_ACTOR_KEY, MAX_KEY, MAX_SEQ, step_of
from ._sqlite_unpack import PackedReads
from ._sqltimers import SqliteTimers

__all__ = ["SqliteStore"]

Durability = Literal["fsync", "survive-process-crash"]


class UndecodableText:
    """A TEXT value that is not valid UTF-8 (damage): the connection's ``text_factory``
    returns this instead of raising, so the column check names it."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


def _text(raw: bytes) -> str | UndecodableText:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return UndecodableText(raw)


#: SQLite errors that, in a file holding actorlog's schema, mean the schema text is damaged.
_SCHEMA_MISSES = ("no such column", "no such table", "no such index", "has no column named")

#: SQLite's primary result codes for a file it cannot read as a database.
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


def _is_corrupt(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _CORRUPT_CODES
    text = str(exc)
    return "malformed" in text or "not a database" in text


class SqliteStore(SqliteCommits, SqliteCompaction, SqliteTimers, PackedReads):
    """A SQLite file store (WAL journal, group commit), on asyncio or trio.

    Args:
        path: the database file; created if missing (unless ``read_only``).
        durability: ``"fsync"`` (default, ``synchronous=FULL``) or
            ``"survive-process-crash"`` (``synchronous=NORMAL``: may lose the last commits on
            power loss or OS crash, never on a process crash).
        read_only: open without write access (operators' tools); appends raise.
        busy_timeout: seconds to wait for another process's write lock.
        commit_on_loop: where a lone append (no other append waiting to share its
            transaction) commits while the writer's thread is idle: ``"auto"`` (default) on
            the event loop's thread while recent lone commits took at most 1 ms, else on
            the writer's thread; ``True`` always on the loop's thread; ``False`` never
            (docs/tuning.md, "Commits on the event loop"). Ignored by ``read_only`` stores.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durability: Durability = "fsync",
        read_only: bool = False,
        busy_timeout: float = 5.0,
        commit_on_loop: bool | Literal["auto"] = "auto",
    ) -> None:
        if durability not in ("fsync", "survive-process-crash"):
            raise ConfigurationError(
                f"durability must be 'fsync' or 'survive-process-crash', not {shown(durability)}"
            )
        if not isinstance(commit_on_loop, bool) and not (
            isinstance(commit_on_loop, str) and commit_on_loop == "auto"
        ):
            raise ConfigurationError(
                f"commit_on_loop must be True, False or 'auto', not {shown(commit_on_loop)}"
            )
        self.commit_on_loop: bool | Literal["auto"] = (
            commit_on_loop if isinstance(commit_on_loop, bool) else "auto"
        )
        if not isinstance(path, str | os.PathLike) or not isinstance(os.fspath(path), str):
            raise ConfigurationError(
                f"SqliteStore's path must be a str or os.PathLike of str, not "
                f"{type(path).__qualname__} {shown(path)}"
            )
        self.path = os.fspath(path)
        if "\x00" in self.path:
            raise ConfigurationError(f"SqliteStore's path {shown(path)} holds a NUL")
        if self.path in ("", ":memory:"):
            raise ConfigurationError(
                f"SqliteStore needs a file path, not {shown(self.path)}: its writer and reader "
                "connections must open the same database (an in-memory or temporary SQLite "
                "database is private to one connection). Use MemoryStore for a store in "
                "memory, or a file in a temporary directory."
            )
        self.durability: Durability = durability
        self.read_only = read_only
        # a PRAGMA busy_timeout in milliseconds (a C int): up to about 24 days
        self.busy_timeout = validate_seconds(busy_timeout, "busy_timeout", maximum=2_000_000.0)
        if self.busy_timeout < 0:
            raise ConfigurationError(
                f"busy_timeout must be >= 0 seconds, not {shown(busy_timeout)}"
            )
        self._w: Connection | None = None
        self._r: Connection | None = None
        self._init_commits(commit_on_loop)
        self._registrar: GroupCommitter[Registration] = GroupCommitter(self._register)
        self._key_top: int | None = None  # format 5's highest actor key, once read (an open)
        self._lock_fd: int | None = None
        self._actorlog_schema = False  # the file holds actorlog's tables (set by open)
        #: the file's layout (set by open): 5, 4 for a file made in format 4 (``log``
        #: ``WITHOUT ROWID``), 3 for a file made in format 3 (no packed payloads), or 2 for
        #: a file made in format 1 or 2
        self.layout = FORMAT_VERSION
        self._step_sql = step_of(FORMAT_VERSION, True)  # the step lookup (set by open)

    @property
    def capabilities(self) -> StoreCapabilities:
        # one writing process per file (the lock); readers in other processes are welcome
        return StoreCapabilities(torn_writes=False, multi_process=False, durable=True, timers=True)

    #: What ``actorlog verify`` cannot see in this store (it prints these lines).
    verify_limits: tuple[str, ...] = (
        "verify checks the rows SQLite returns and runs SQLite's own integrity check; "
        "neither can see transactions SQLite itself dropped (a damaged or deleted -wal "
        "file loses committed writes without a trace). "
        "Back up a live store with VACUUM INTO or sqlite3 .backup, never by copying the "
        "file alone (docs/recovery.md, 'Backups and the SQLite files').",
    )

    @property
    def _busy_pragma(self) -> str:
        """Every connection's wait for another process's lock."""
        return f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}"

    @property
    def _sync_pragma(self) -> str:
        """Every writing connection's durability (``durability``)."""
        return f"PRAGMA synchronous={'FULL' if self.durability == 'fsync' else 'NORMAL'}"

    @property
    def lock_path(self) -> str:
        """The file whose ``flock`` a writable store holds while open (one runtime per file)."""
        return os.path.abspath(self.path) + "-actorlog.lock"

    @property
    def url(self) -> str:
        return "sqlite:///" + os.path.abspath(self.path)

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open (creating the file and schema unless ``read_only``).

        Raises:
            StoreLockedError: another writer (a runtime, ``actorlog resolve``) has the file.
            StoreCorruptError: SQLite cannot read the file as a database.
            UnsupportedFormatError: the file holds a newer format; nothing was changed.
            StoreUnavailableError: the file cannot be opened.
        """
        if self._r is not None:
            return
        self._actor_keys, self._tag_keys = {}, {}  # read again from the file opened now
        self._key_top = None
        if os.path.isdir(self.path):
            # before SQLite sees it, for a clear error
            raise StoreUnavailableError(f"{self.path} is a directory, not a SQLite store")
        try:
            if self.read_only:
                if not os.path.exists(self.path):
                    raise StoreUnavailableError(f"no SQLite store at {self.path}")
                uri = "file:" + os.path.abspath(self.path) + "?mode=ro"
                self._r = await Connection.connect(uri, uri=True, text_factory=_text)
                await self._r.execute(self._busy_pragma)
                await self._check_version(self._r)
                return
            self._take_lock()
            new = not os.path.exists(self.path) or not os.path.getsize(self.path)
            w = await Connection.connect(self.path, text_factory=_text)  # shielded
            self._w = w
            await w.set_busy_timeout(int(self.busy_timeout * 1000))  # tracked: Connection.direct
            if new:  # an existing file keeps its mode (and a refused one stays unchanged)
                await w.execute(PRELUDE)  # before WAL mode writes the header of a new file
            await self._when_not_busy(w, "PRAGMA journal_mode=WAL")
            await w.execute(self._sync_pragma)
            await self._check_version(w)
            schema = SCHEMA5 if self.layout >= 5 else SCHEMA3 if self.layout >= 3 else SCHEMA
            await w.executescript("BEGIN IMMEDIATE;" + schema + "COMMIT;")
            self._step_sql = step_of(self.layout, True)  # the schema has the step index now
            self._actorlog_schema = True
            await w.execute(
                # a format-1 file is written in format 2 from now on ([F1]); a file of
                # format 2 keeps its layout (format 3 is a new file's: docs/upgrading.md)
                "INSERT INTO actorlog_meta VALUES ('format_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(self.layout),),
            )
            r = await Connection.connect(self.path, text_factory=_text)  # shielded
            self._r = r
            await r.execute(self._busy_pragma)
        except sqlite3.Error as exc:
            await self.close()
            if _is_corrupt(exc):
                raise StoreCorruptError(self.path, f"SQLite: {exc}") from exc
            raise StoreUnavailableError(f"cannot open SQLite store {self.path}: {exc}") from exc
        except UnicodeDecodeError as exc:  # an error message quoting damaged schema text
            await self.close()
            raise StoreCorruptError(self.path, f"SQLite reports damaged text: {exc}") from exc
        except BaseException:
            await self.close()
            raise

    def _take_lock(self) -> None:
        """Take the one-writer lock, or raise ``StoreLockedError`` naming its holder."""
        if not _writelock.AVAILABLE or self._lock_fd is not None:
            return
        self._lock_fd = _writelock.take(self.path, self.lock_path)

    def _release_lock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            _writelock.release(fd)

    async def _when_not_busy(self, conn: Connection, sql: str) -> None:
        """Run ``sql``, retrying SQLITE_BUSY for up to ``busy_timeout``. Switching a new
        database to WAL needs an exclusive lock, and SQLite answers BUSY at once, without
        its busy handler, to connections racing for it (several processes opening one new
        database at the same moment)."""
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.002
        while True:
            try:
                await conn.execute(sql)
                return
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", sqlite3.SQLITE_BUSY) & 0xFF
                if busy != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def _check_version(self, conn: Connection) -> None:
        version = await check_version(conn, self.path)
        if version is not None:
            self._actorlog_schema = True
        self.layout = await file_layout(conn, version)
        indexed = await conn.execute_fetchall(
            "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'entries_step'"
        )
        self._step_sql = step_of(self.layout, bool(list(indexed)))

    async def close(self) -> None:
        try:
            await self._close_connections()
        finally:
            self._release_lock()

    async def _close_connections(self) -> None:
        for name in ("_w", "_r"):
            conn = getattr(self, name)
            setattr(self, name, None)
            if conn is not None:
                try:
                    await conn.close()  # shielded: an open cut short still closes
                except sqlite3.Error:
                    pass

    def _reader(self) -> Connection:
        if self._r is None:
            raise StoreClosedError(f"SQLite store {self.path} is not open")
        return self._r

    def _writer(self) -> Connection:
        if self._w is None:
            if self.read_only:
                raise StoreClosedError(f"SQLite store {self.path} is open read-only")
            raise StoreClosedError(f"SQLite store {self.path} is not open")
        return self._w

    def _error(self, what: str, exc: Exception) -> Exception:
        """Translate a driver error. Only a closed connection is ``StoreClosedError``: a
        value SQLite cannot take (text with a lone surrogate, an integer beyond 64 bits) is
        the caller's ``ConfigurationError``; a damaged file is ``StoreCorruptError``."""
        if isinstance(exc, sqlite3.ProgrammingError) and "closed database" in str(exc):
            return StoreClosedError(f"SQLite store {self.path} is closed ({exc})")
        if isinstance(exc, sqlite3.Error):
            if _is_corrupt(exc):
                return StoreCorruptError(self.path, f"SQLite: {exc}")
            if self._actorlog_schema and any(m in str(exc) for m in _SCHEMA_MISSES):
                # this code's SQL is fixed and matches the schema it created: a name SQLite
                # cannot find means the schema text stored in the file was damaged
                return StoreCorruptError(self.path, f"SQLite: {exc} (damaged schema)")
            return StoreUnavailableError(f"SQLite {what} failed: {exc}")
        if isinstance(exc, UnicodeDecodeError):
            # SQLite's own error message quotes damaged schema text (sqlite_master)
            return StoreCorruptError(self.path, f"SQLite reports damaged text: {exc}")
        if isinstance(exc, (UnicodeError, OverflowError)):
            return ConfigurationError(
                f"SQLite cannot store a value of this {what}: {type(exc).__name__}: {exc} "
                "(text must be valid Unicode without lone surrogates, integers within 64 bits)"
            )
        if self._r is None or str(exc) in ("Connection closed", "no active connection"):
            return StoreClosedError(f"SQLite store {self.path} is closed ({exc})")
        return StoreUnavailableError(f"SQLite {what} failed: {type(exc).__name__}: {exc}")

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return await self._reader().execute_fetchall(sql, params)
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            raise self._error("read", exc) from exc

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> None:
        try:
            await self._writer().execute(sql, params)
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            raise self._error("write", exc) from exc

    # the connection protocol of the SQL mixins (``_sql.SqlConnection``)

    async def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._fetch(sql, params)

    async def _command(self, sql: str, params: Sequence[Any] = ()) -> int:
        try:
            return int(await self._writer().changes(sql, params))
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            raise self._error("write", exc) from exc

    # -- actors ----------------------------------------------------------------------------

    async def register_actor(self, actor_id: str, actor_type: str) -> ActorRow:
        row = await self.get_actor(actor_id)  # a known actor: no write
        if row is None:
            self._writer()
            # concurrent registrations share one transaction (spawning many new actors)
            reg = Registration(actor_id, actor_type, time.time())
            await self._registrar.submit(reg)
            if reg.inserted:  # the row just written (``created``): no read back
                return reg.row()
            row = await self.get_actor(actor_id)
        assert row is not None
        return row

    async def _register(self, batch: Sequence[Request[Registration]]) -> None:
        """Insert a batch of new actors' rows (a failure fails every registration in it)."""
        items = [req.item for req in batch]
        for i in range(0, len(items), MAX_ROWS_PER_STATEMENT):
            chunk = items[i : i + MAX_ROWS_PER_STATEMENT]
            sql, values = insert_sql(chunk)
            if self.layout >= 5:  # [F24]: a key the log's rowids can hold, or nothing
                await self._keys_left(len(chunk))
            try:
                mark_inserted(chunk, await self._writer().execute_fetchall(sql, values))
            except (sqlite3.Error, ValueError, OverflowError) as exc:
                raise self._error("write", exc) from exc

    async def _keys_left(self, n: int) -> None:
        """Refuse ``n`` registrations a format-5 file has no actor keys for ([F24]). The
        file's highest key is read once an open, then counted up (this store is the file's
        one writer; an id already registered makes the count an upper bound), and read
        again near the bound."""
        top = self._key_top
        if top is None or top + n > MAX_ACTOR_KEY:
            try:
                ((found,),) = await self._writer().execute_fetchall(MAX_KEY)
            except sqlite3.Error as exc:
                raise self._error("write", exc) from exc
            top = found if type(found) is int else 0
            if top + n > MAX_ACTOR_KEY:
                raise ConfigurationError(
                    f"a SQLite file of format 5 holds actor keys 1 to {MAX_ACTOR_KEY}, and its "
                    f"highest is {top}: cannot register {n} more actor(s); nothing was written"
                )
        self._key_top = top + n

    async def get_actor(self, actor_id: str) -> ActorRow | None:
        rows = await self._fetch(f"SELECT {ACTOR_COLS} FROM actors WHERE actor_id = ?", (actor_id,))
        return actor_row(rows[0]) if rows else None

    async def list_actors(self) -> list[ActorRow]:
        return [
            actor_row(r, lenient=True)
            for r in await self._fetch(f"SELECT {ACTOR_COLS} FROM actors ORDER BY actor_id")
        ]

    async def unfinished_actors(self) -> list[ActorRow]:
        """``UnfinishedStore``: one scan in SQLite of the summary rows."""
        return [actor_row(r, lenient=True) for r in await self._fetch(UNFINISHED)]

    # -- the log ---------------------------------------------------------------------------

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        for i, row in enumerate(rows, start=1):
            if row.actor_id != actor_id or row.seq != expected_last_seq + i:
                raise SequenceConflictError(actor_id, expected_last_seq, None)
        if not rows:
            return
        self._writer()
        if self.layout >= 5 and rows[-1].seq > MAX_SEQ:
            raise ConfigurationError(
                f"a SQLite file of format 5 holds seqs up to {MAX_SEQ} per actor: actor "
                f"{actor_id!r} cannot append seq {rows[-1].seq}"
            )
        if self.layout >= 4:  # [F21] packed against the rows before them in this append
            rows = _pack.pack_rows(rows)
        await self._committer.submit((actor_id, expected_last_seq, rows))

    async def check_integrity(self) -> list[str]:
        """``IntegrityCheckingStore``: SQLite's ``PRAGMA integrity_check`` of the whole file
        (every b-tree page, every index against its table; at most 100 problem lines), on
        the reader connection (WAL: it does not block a runtime writing meanwhile)."""
        try:
            rows = await self._reader().execute_fetchall("PRAGMA integrity_check(100)")
        except sqlite3.Error as exc:
            if _is_corrupt(exc):  # too damaged for the check to finish: that is its finding
                return [f"SQLite: {exc}"]
            raise self._error("integrity check", exc) from exc
        lines = [str(r[0]) for r in rows]
        return [] if lines == ["ok"] else lines

    # -- snapshots -------------------------------------------------------------------------

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        await self._write(
            "INSERT OR REPLACE INTO snapshots (" + SNAPSHOT_INFO_COLS + ", data) "
            "VALUES (?,?,?,?,?,?,?,?,?)",
            snapshot_values(snapshot),
        )

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        rows = await self._fetch(
            f"SELECT {SNAPSHOT_INFO_COLS} FROM snapshots WHERE actor_id = ? ORDER BY seq DESC",
            (actor_id,),
        )
        return [snapshot_info(r, actor_id=actor_id) for r in rows]

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        rows = await self._fetch(
            f"SELECT {SNAPSHOT_INFO_COLS}, data FROM snapshots WHERE actor_id = ? AND seq = ?",
            (actor_id, seq),
        )
        if not rows:
            return None
        return snapshot_data(snapshot_info(rows[0][:8], actor_id=actor_id), rows[0][8])

    async def delete_snapshots(self, actor_id: str, seqs: Sequence[int]) -> None:
        if seqs:
            await self._write(
                "DELETE FROM snapshots WHERE actor_id = ? AND seq IN ("
                + ",".join("?" * len(seqs))
                + ")",
                (actor_id, *seqs),
            )

    # -- consistent reads (optional store method, see actorlog.store) ----------------------

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[SqliteStore]:
        """A read-only view of this store whose reads all see one snapshot of the database:
        a connection of its own, in one read transaction (WAL: it does not block the
        writer, and sees none of its commits after the first read). For operators' tools
        that must not mistake a runtime's progress for damage.

        Raises:
            StoreClosedError: the store is not open.
            StoreUnavailableError: the connection could not be opened.
        """
        self._reader()
        uri = "file:" + os.path.abspath(self.path) + "?mode=ro"
        try:  # TEXT decoded as the store's own connections do
            conn = await Connection.connect(uri, uri=True, text_factory=_text)
        except sqlite3.Error as exc:
            if _is_corrupt(exc):
                raise StoreCorruptError(self.path, f"SQLite: {exc}") from exc
            raise StoreUnavailableError(f"cannot read SQLite store {self.path}: {exc}") from exc
        view = copy.copy(self)
        view._w = None  # the view never writes (nor closes the store's writer)
        view._r = conn
        view.read_only = True
        try:
            await conn.execute(self._busy_pragma)
            await conn.execute("BEGIN")
            yield view
        except sqlite3.Error as exc:
            raise self._error("read", exc) from exc
        finally:
            view._r = None
            with anyio.CancelScope(shield=True), contextlib.suppress(sqlite3.Error, ValueError):
                await conn.execute("ROLLBACK")
            with contextlib.suppress(sqlite3.Error):
                await conn.close()  # shielded

    # -- operator history ------------------------------------------------------------------

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        await self._write(
            "INSERT INTO events (actor_id, at, kind, detail) VALUES (?, ?, ?, ?)",
            (actor_id, time.time(), kind, detail),
        )

    async def read_events(self, actor_id: str) -> list[EventRow]:
        rows = await self._fetch(
            "SELECT actor_id, at, kind, detail FROM events WHERE actor_id = ? ORDER BY id",
            (actor_id,),
        )
        return [event_row(r, actor_id=actor_id) for r in rows]
