"""The log store half of :class:`PostgresStore`: the pool, group commit, the log, snapshots,
events, consistent reads (the package docstring has the guarantees)."""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import anyio.lowlevel
import asyncpg
import attrs
from actorlog.store import (
    ActorRow,
    ConfigurationError,
    EntryRow,
    EventRow,
    LeaseLostError,
    SequenceConflictError,
    SnapshotInfo,
    SnapshotRow,
    StoreCapabilities,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
    StoreURLError,
    actor_row,
    entry_row,
    event_row,
    shown,
    snapshot_data,
    snapshot_info,
)

from .._audit import PostgresAudit
from .._groupcommit import GroupCommitter, Request, require_asyncio
from .._sql import (
    ACTOR_COLS,
    ENTRY_COLS,
    SNAPSHOT_INFO_COLS,
    entries,
    select_entries,
    snapshot_values,
)
from .commit import Append, commit_batch
from .compaction import CompactionMethods
from .driver import DRIVER_ERRORS, is_bad_input, is_corruption, redact
from .leases import LeaseMethods
from .listener import Listener
from .lookups import MessageLookups
from .schema import (
    FENCE_WHERE,
    MAX_IDENTIFIER_BYTES,
    check_read_only,
    migrate,
    quote_ident,
    schema_from_url,
)
from .timers import TimerMethods

__all__ = ["PostgresStore"]


async def _keep_session(conn: Any) -> None:
    """Pool ``reset`` hook that skips asyncpg's ``RESET ALL`` round trip on every release.

    This store never changes session state on pooled connections: no ``SET``, no ``LISTEN``
    (the listener, :meth:`PostgresStore.listen_inbox`, has its own connection), no cursors, and only
    transaction-scoped advisory locks. asyncpg still rolls back a transaction left open.
    """


# Rows are built by actorlog.store's checked constructors (every column type-checked, as in
# every store): the server enforces its column types, but a wrong one must never become an
# internal TypeError.


class PostgresStore(LeaseMethods, CompactionMethods, PostgresAudit, TimerMethods):
    """A PostgreSQL store (asyncpg pool, group commit, conditional appends in the database).

    Several runtimes, on several machines, may open the same database: appends to one actor
    from two of them never interleave; the loser gets ``SequenceConflictError``.

    Args:
        url_or_dsn: a ``postgresql://user:password@host:port/dbname`` URL. Query parameters
            other than libpq's connection options become server settings (asyncpg), e.g.
            ``?search_path=agents``.
        read_only: open for reading only (operators' tools): sessions are read-only and
            writes raise ``StoreClosedError``; the schema must already exist.
        schema: keep actorlog's tables in this PostgreSQL schema (created on open if
            missing) instead of the first schema of the connection's ``search_path``; the
            URL may give it as ``?schema=NAME`` instead (taken out of the connection
            parameters). It replaces any ``search_path`` of the URL for the store's
            sessions. At most 63 bytes (PostgreSQL cuts longer identifiers, so two long
            names could share one store): longer raises ``ConfigurationError``.
            :attr:`url` then carries it as ``search_path``.
        min_size: connections the pool keeps open.
        max_size: most connections the pool opens (one is used by a commit at a time;
            the others serve reads).
        command_timeout: seconds after which one statement is abandoned and the call raises
            ``StoreUnavailableError`` (an abandoned append may or may not have committed).
            ``None``: no limit.

    Attributes:
        batch_sizes: the number of appends in each recent commit batch (bounded), for
            telemetry and tests.
        lookup_batch_sizes: the number of :meth:`find_message` calls each recent lookup
            statement answered (bounded), for tests and benchmarks.
    """

    def __init__(
        self,
        url_or_dsn: str,
        *,
        read_only: bool = False,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        command_timeout: float | None = 60.0,
    ) -> None:
        if not isinstance(url_or_dsn, str):
            raise StoreURLError(
                shown(url_or_dsn), f"a store URL is a str, not {type(url_or_dsn).__qualname__}"
            )
        if not url_or_dsn:
            raise StoreURLError(url_or_dsn, "the URL is empty")
        url_or_dsn, schema = schema_from_url(url_or_dsn, schema)
        if schema is not None and (not schema or "\x00" in schema):
            raise ConfigurationError(f"invalid PostgreSQL schema name {shown(schema)}")
        if schema is not None and len(schema.encode("utf-8", "replace")) > MAX_IDENTIFIER_BYTES:
            raise ConfigurationError(
                f"PostgreSQL schema name {shown(schema)} is "
                f"{len(schema.encode('utf-8', 'replace'))} "
                f"bytes long; PostgreSQL cuts identifiers to {MAX_IDENTIFIER_BYTES} bytes, so "
                "two such names could share one store. Use a shorter name."
            )
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ConfigurationError(
                f"need 0 <= min_size <= max_size and max_size >= 1, got {min_size}, {max_size}"
            )
        self.dsn = url_or_dsn
        self.read_only = read_only
        self.schema = schema
        self.min_size = min_size
        self.max_size = max_size
        self.command_timeout = command_timeout
        self._pool: Any = None  # asyncpg.Pool while open
        self._committer: GroupCommitter[Append] = GroupCommitter(self._commit)
        self.batch_sizes: list[int] = []
        self._fences: dict[str, int] = {}
        self._listener: Listener | None = None
        #: concurrent find_message calls share one statement (None in a reading() view)
        self._lookups: MessageLookups | None = MessageLookups(
            lambda: self._pool, self._failure, self._closed_error
        )

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            torn_writes=False, multi_process=True, durable=True, leases=True, timers=True
        )

    @property
    def lookup_batch_sizes(self) -> list[int]:
        return self._lookups.batch_sizes if self._lookups is not None else []

    @property
    def url(self) -> str:
        """The DSN; with ``schema`` set, it carries ``search_path`` so that it reopens this
        store (it includes the password if the DSN had one)."""
        if self.schema is None:
            return self.dsn
        parts = urlsplit(self.dsn)
        query = [
            kv for kv in parse_qsl(parts.query, keep_blank_values=True) if kv[0] != "search_path"
        ]
        query.append(("search_path", quote_ident(self.schema)))
        return urlunsplit(parts._replace(query=urlencode(query)))

    def __repr__(self) -> str:
        mode = ", read_only=True" if self.read_only else ""
        return f"PostgresStore({redact(self.url)!r}{mode})"

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the pool and create or migrate the schema (one transaction, under an
        advisory lock). Idempotent.

        Raises:
            UnsupportedFormatError: the database holds a newer format; nothing was changed.
            StoreUnavailableError: the server cannot be reached, or (read-only) holds no
                actorlog store.
            StoreURLError: the DSN does not parse.
            ConfigurationError: not running on asyncio (asyncpg needs it; on trio, use
                SqliteStore).
        """
        if self._pool is not None:
            return
        require_asyncio("PostgresStore", "asyncpg")
        settings: dict[str, str] = {}
        if self.schema is not None:
            settings["search_path"] = quote_ident(self.schema)
        if self.read_only:
            settings["default_transaction_read_only"] = "on"
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=self.min_size,
                max_size=self.max_size,
                command_timeout=self.command_timeout,
                server_settings=settings,
                reset=_keep_session,
            )
        except ValueError as exc:  # asyncpg's DSN parser (ClientConfigurationError too)
            raise StoreURLError(redact(self.dsn), str(exc)) from exc
        except DRIVER_ERRORS as exc:
            raise StoreUnavailableError(
                f"cannot connect to PostgreSQL at {redact(self.dsn)}: {exc}"
            ) from exc
        try:
            async with pool.acquire() as conn:
                if self.read_only:
                    await check_read_only(conn, redact(self.url))
                else:
                    await migrate(conn, self.schema, redact(self.url))
        except BaseException as exc:
            pool.terminate()
            if is_corruption(exc):
                raise StoreCorruptError(redact(self.url), f"PostgreSQL: {exc}") from exc
            if isinstance(exc, DRIVER_ERRORS):
                raise StoreUnavailableError(
                    f"cannot open PostgreSQL store {redact(self.url)}: {exc}"
                ) from exc
            raise
        self._pool = pool

    async def close(self) -> None:
        """Wait for commits in flight (up to 10 s), then close every connection. Idempotent."""
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.close()
        pool, self._pool = self._pool, None
        if pool is None:
            return
        with anyio.move_on_after(10, shield=True) as scope:
            try:
                await pool.close()
            except DRIVER_ERRORS:
                pool.terminate()
        if scope.cancelled_caught:
            pool.terminate()

    def _open_pool(self) -> Any:
        if self._pool is None:
            raise self._closed_error()
        return self._pool

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"PostgreSQL store {redact(self.url)} is not open")

    def _writable_pool(self) -> Any:
        pool = self._open_pool()
        if self.read_only:
            raise StoreClosedError(f"PostgreSQL store {redact(self.url)} is open read-only")
        return pool

    def _failure(self, what: str, exc: BaseException) -> StoreError | ConfigurationError:
        """Translate a driver error: closed if the store was closed meanwhile; a value the
        driver cannot send (text with a lone surrogate, an integer beyond 64 bits) is the
        caller's ``ConfigurationError``, not a transient failure; damage the server reports
        in its own files (SQLSTATE XX001, XX002) is ``StoreCorruptError``."""
        if self._pool is None:
            return StoreClosedError(f"PostgreSQL store {redact(self.url)} is closed")
        if is_corruption(exc):
            return StoreCorruptError(redact(self.url), f"PostgreSQL {what}: {exc}")
        if is_bad_input(exc):
            return ConfigurationError(f"PostgreSQL cannot take a value of this {what}: {exc}")
        return StoreUnavailableError(f"PostgreSQL {what} failed: {type(exc).__name__}: {exc}")

    # One statement runs to its end even when its caller is cancelled (the cancellation is
    # delivered right after): asyncpg cancelled mid-protocol can leave a pooled connection
    # broken ("unexpected connection_lost()" from its callbacks). A statement's time is
    # bounded by the server (statement_timeout) and by the pool's command timeout.

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        pool = self._open_pool()
        try:
            with anyio.CancelScope(shield=True):
                rows = list(await pool.fetch(sql, *args))
        except DRIVER_ERRORS as exc:
            raise self._failure("read", exc) from exc
        await anyio.lowlevel.checkpoint_if_cancelled()
        return rows

    async def _execute_count(self, sql: str, *args: Any) -> int:
        """Execute a write; return how many rows it affected."""
        pool = self._writable_pool()
        try:
            with anyio.CancelScope(shield=True):
                status = await pool.execute(sql, *args)
        except DRIVER_ERRORS as exc:
            raise self._failure("write", exc) from exc
        await anyio.lowlevel.checkpoint_if_cancelled()
        return int(str(status).rsplit(" ", 1)[-1])

    async def _execute(self, sql: str, *args: Any) -> None:
        await self._execute_count(sql, *args)

    # the connection protocol of the SQL mixins (``_sql.SqlConnection``)

    async def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return await self._fetch(sql, *params)

    async def _command(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._execute_count(sql, *params)

    # -- actors ----------------------------------------------------------------------------

    async def register_actor(self, actor_id: str, actor_type: str) -> ActorRow:
        """One statement for a new actor: the insert returns the row it made (``created``);
        an actor that exists is read after it (the first registration's type is kept)."""
        pool = self._writable_pool()
        try:
            with anyio.CancelScope(shield=True):
                inserted = await pool.fetch(
                    "INSERT INTO actors (actor_id, actor_type, created_at) VALUES ($1, $2, $3) "
                    f"ON CONFLICT (actor_id) DO NOTHING RETURNING {ACTOR_COLS}",
                    actor_id,
                    actor_type,
                    time.time(),
                )
        except DRIVER_ERRORS as exc:
            raise self._failure("write", exc) from exc
        await anyio.lowlevel.checkpoint_if_cancelled()
        if inserted:
            return attrs.evolve(actor_row(tuple(inserted[0])), created=True)
        row = await self.get_actor(actor_id)
        assert row is not None  # deleted only when not running (delete_actor)
        return row

    async def get_actor(self, actor_id: str) -> ActorRow | None:
        rows = await self._fetch(f"SELECT {ACTOR_COLS} FROM actors WHERE actor_id = $1", actor_id)
        return actor_row(tuple(rows[0])) if rows else None

    async def list_actors(self) -> list[ActorRow]:
        rows = await self._fetch(f"SELECT {ACTOR_COLS} FROM actors ORDER BY actor_id")
        return [actor_row(tuple(r), lenient=True) for r in rows]

    async def unfinished_actors(self) -> list[ActorRow]:
        """``UnfinishedStore``: one query (the columns are typed: no damaged types)."""
        rows = await self._fetch(
            f"SELECT {ACTOR_COLS} FROM actors WHERE handled_seq < last_message_seq "
            "ORDER BY actor_id"
        )
        return [actor_row(tuple(r), lenient=True) for r in rows]

    # -- the log ---------------------------------------------------------------------------

    async def append(
        self,
        actor_id: str,
        expected_last_seq: int,
        rows: Sequence[EntryRow],
        *,
        fence: int | None = None,
    ) -> None:
        """Atomically append ``rows`` after ``expected_last_seq`` (see ``Store.append``).

        Concurrent calls share one transaction (group commit). A cancelled call may or may
        not have committed.

        Args:
            fence: the writer's fencing token for this actor (default: the one registered
                with :meth:`set_fence`, if any). The database rejects the append with
                :class:`~actorlog.LeaseLostError` unless it is the actor's current token.
        """
        for i, row in enumerate(rows, start=1):
            if row.actor_id != actor_id or row.seq != expected_last_seq + i:
                raise SequenceConflictError(actor_id, expected_last_seq, None)
        self._writable_pool()
        if not rows:
            return
        if fence is None:
            fence = self._fences.get(actor_id)
        await self._committer.submit((actor_id, expected_last_seq, rows, fence))

    async def _commit(self, batch: Sequence[Request[Append]]) -> None:
        """Commit a batch: one statement (one transaction) per chunk of requests."""
        self.batch_sizes.append(len(batch))
        if len(self.batch_sizes) > 1024:
            del self.batch_sizes[:512]
        pool = self._pool
        if pool is None or self.read_only:
            for req in batch:
                req.error = StoreClosedError(f"PostgreSQL store {redact(self.url)} is closed")
            return
        try:
            conn = await pool.acquire()
        except DRIVER_ERRORS as exc:
            err = self._failure("commit", exc)
            err.__cause__ = exc
            for req in batch:
                req.error = err
            return
        try:
            await commit_batch(conn, batch, self._failure)
        finally:
            with contextlib.suppress(*DRIVER_ERRORS):  # the pool discards a broken one
                await pool.release(conn)

    async def read(
        self,
        actor_id: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[EntryRow]:
        sql, args = select_entries("postgres", actor_id, after_seq, upto_seq, kinds, limit)
        return entries(await self._fetch(sql, *args), actor_id, after_seq)

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        """The entry logged with ``message_id``, or None. Concurrent calls share one
        statement (``lookups``); a :meth:`reading` view reads in its own transaction."""
        if self._lookups is not None:
            self._open_pool()
            return await self._lookups.find(actor_id, message_id)
        rows = await self._fetch(
            f"SELECT {ENTRY_COLS} FROM entries WHERE actor_id = $1 AND message_id = $2",
            actor_id,
            message_id,
        )
        return entry_row(tuple(rows[0]), actor_id=actor_id) if rows else None

    async def message_ids(self, actor_id: str, *, limit: int) -> list[str] | None:
        """``MessageIdIndex``: one scan of the message-id index (None past ``limit``)."""
        rows = await self._fetch(
            "SELECT message_id FROM entries WHERE actor_id = $1 AND message_id IS NOT NULL "
            "LIMIT $2",
            actor_id,
            limit + 1,
        )
        return None if len(rows) > limit else [str(r[0]) for r in rows]

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        if kind == "step":  # a literal, so the partial index applies to every plan
            rows = await self._fetch(
                f"SELECT {ENTRY_COLS} FROM entries "
                "WHERE actor_id = $1 AND kind = 'step' AND ref = $2 ORDER BY seq",
                actor_id,
                ref,
            )
        else:  # operators' tools: a ref always points back, so scan the log after it
            rows = await self._fetch(
                f"SELECT {ENTRY_COLS} FROM entries "
                "WHERE actor_id = $1 AND seq > $2 AND kind = $3 AND ref = $2 ORDER BY seq",
                actor_id,
                ref,
                kind,
            )
        return entries(rows, actor_id, ref)

    # -- snapshots -------------------------------------------------------------------------

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        """Write (or replace) a snapshot. Fenced like appends (see :meth:`record_event`):
        raises :class:`~actorlog.LeaseLostError` if this store's token for the actor is
        no longer the current one, and writes nothing."""
        i = snapshot.info
        fence = self._fences.get(i.actor_id)
        written = await self._execute_count(
            f"INSERT INTO snapshots ({SNAPSHOT_INFO_COLS}, data) "
            "SELECT $1::text, $2::bigint, $3::bigint, $4::text, $5::integer, $6::bytea, "
            "$7::bigint, $8::float8, $9::bytea "
            f"{FENCE_WHERE.format(n=10)} "
            "ON CONFLICT (actor_id, seq) DO UPDATE SET "
            "handled_seq = EXCLUDED.handled_seq, type_tag = EXCLUDED.type_tag, "
            "schema_version = EXCLUDED.schema_version, digest = EXCLUDED.digest, "
            "size = EXCLUDED.size, created_at = EXCLUDED.created_at, data = EXCLUDED.data",
            *snapshot_values(snapshot),
            fence,
        )
        if not written:
            raise LeaseLostError(i.actor_id, fence, None)

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        rows = await self._fetch(
            f"SELECT {SNAPSHOT_INFO_COLS} FROM snapshots WHERE actor_id = $1 ORDER BY seq DESC",
            actor_id,
        )
        return [snapshot_info(tuple(r), actor_id=actor_id) for r in rows]

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        rows = await self._fetch(
            f"SELECT {SNAPSHOT_INFO_COLS}, data FROM snapshots WHERE actor_id = $1 AND seq = $2",
            actor_id,
            seq,
        )
        if not rows:
            return None
        return snapshot_data(snapshot_info(tuple(rows[0])[:8], actor_id=actor_id), rows[0][8])

    async def delete_snapshots(self, actor_id: str, seqs: Sequence[int]) -> None:
        """Delete snapshots; fenced (see :meth:`record_event`): a stale token deletes none."""
        if seqs:
            await self._execute(
                "DELETE FROM snapshots WHERE actor_id = $1 AND seq = ANY($2::bigint[]) "
                f"AND {FENCE_WHERE.format(n=3)[6:]}",
                actor_id,
                list(seqs),
                self._fences.get(actor_id),
            )

    # -- consistent reads (optional store method, see actorlog.store) ----------------------

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[PostgresStore]:
        """A read-only view of this store whose reads all see one snapshot: one pooled
        connection in a REPEATABLE READ, READ ONLY transaction, rolled back at the end. For
        operators' tools that must not mistake a runtime's progress for damage.

        Raises:
            StoreClosedError: the store is not open.
            StoreUnavailableError: the server could not be reached.
        """
        pool = self._open_pool()
        try:
            conn = await pool.acquire()
        except DRIVER_ERRORS as exc:
            raise self._failure("read", exc) from exc
        try:
            tr = conn.transaction(isolation="repeatable_read", readonly=True)
            try:
                await tr.start()
            except DRIVER_ERRORS as exc:
                raise self._failure("read", exc) from exc
            view = copy.copy(self)
            view._pool = conn  # asyncpg: a connection fetches like a pool
            view._listener = None
            view._lookups = None  # its reads go to its own connection (one snapshot)
            view.read_only = True
            try:
                yield view
            finally:
                view._pool = None
                with anyio.CancelScope(shield=True), contextlib.suppress(*DRIVER_ERRORS):
                    await tr.rollback()
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(*DRIVER_ERRORS):
                await pool.release(conn)

    # -- operator history ------------------------------------------------------------------

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        """Add an operator-history event. Fenced like appends: with a token registered for
        the actor (:meth:`set_fence`), the event is recorded only if that token is still the
        actor's current one, under a share lock of the lease row (a take-over waits for it,
        so an accepted event precedes everything the new owner records). A runtime that lost
        the actor adds nothing to its history; a refused event is dropped without error
        (history is best effort)."""
        await self._execute(
            "INSERT INTO events (actor_id, at, kind, detail) "
            f"SELECT $1::text, $2::float8, $3::text, $4::text {FENCE_WHERE.format(n=5)}",
            actor_id,
            time.time(),
            kind,
            detail,
            self._fences.get(actor_id),
        )

    async def read_events(self, actor_id: str) -> list[EventRow]:
        rows = await self._fetch(
            "SELECT actor_id, at, kind, detail FROM events WHERE actor_id = $1 ORDER BY id",
            actor_id,
        )
        return [event_row(tuple(r), actor_id=actor_id) for r in rows]
