"""The shared store: PostgreSQL through an asyncpg pool, group commit, several runtimes.

Schema and guarantees mirror :mod:`actorlog.stores.sqlite` (``docs/FORMAT.md``, "PostgreSQL
schema"). Highlights:

* Appends from every actor that arrive while a commit is in flight share the next
  transaction: one ``INSERT ... SELECT FROM unnest(...)`` statement in autocommit mode, so one
  round trip and one commit per batch, whatever the number of rows.
* The conditional append is enforced *inside* the database by a ``BEFORE INSERT`` trigger:
  it locks the actor's ``actors`` row (``SELECT ... FOR UPDATE``) and rejects a row whose seq
  is not the actor's last seq + 1, then advances the summary columns. A racing writer in
  another process waits for that row lock, then sees the winner's seq and is rejected, so two
  runtimes can never interleave one actor's log. Rejections are SQLSTATE class 23 (integrity
  constraint violation); duplicate message ids hit a unique index, also class 23.
* When a batch is rejected, its requests are retried one by one, so only the conflicting
  ones fail and the others still commit.
* The schema is created or migrated on :meth:`PostgresStore.open` inside one transaction
  that holds an advisory lock, so processes opening a new database at once do not race; the
  version lives in ``actorlog_meta`` (``format_version``).

Durability is the server's: a commit returns once PostgreSQL reports it durable
(``synchronous_commit``, by default ``on``).

Ownership across runtimes (leases with fencing tokens, DESIGN.md section 7) is not built
yet. The places it goes: a format-2 migration in ``_MIGRATIONS`` adding ``owner``,
``lease_expires_at`` and ``fencing_token`` columns to ``actors``; a check of the writer's
token in the append trigger, which already holds the actor's row lock; and the token passed
with each append in :meth:`PostgresStore._insert_entries`.

asyncpg runs on asyncio only.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import asyncpg
from actorlog._errors import (
    ConfigurationError,
    SequenceConflictError,
    StoreClosedError,
    StoreError,
    StoreUnavailableError,
    StoreURLError,
    UnsupportedFormatError,
)
from actorlog.store import (
    FORMAT_VERSION,
    ActorRow,
    EntryRow,
    EventRow,
    SnapshotInfo,
    SnapshotRow,
    StoreCapabilities,
)

from ._groupcommit import GroupCommitter, Request

__all__ = ["PostgresStore"]

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS actorlog_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS actors (
    actor_id         TEXT PRIMARY KEY,
    actor_type       TEXT NOT NULL,
    created_at       DOUBLE PRECISION NOT NULL,
    last_seq         BIGINT NOT NULL DEFAULT 0,
    last_message_seq BIGINT NOT NULL DEFAULT 0,
    handled_seq      BIGINT NOT NULL DEFAULT 0,
    first_seq        BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS entries (
    actor_id   TEXT   NOT NULL,
    seq        BIGINT NOT NULL,
    kind       TEXT   NOT NULL,
    type_tag   TEXT   NOT NULL,
    ref        BIGINT NOT NULL,
    message_id TEXT,
    payload    BYTEA  NOT NULL,
    checksum   BIGINT NOT NULL,
    PRIMARY KEY (actor_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_message_id
    ON entries (actor_id, message_id) WHERE message_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS entries_ref ON entries (actor_id, kind, ref);
CREATE TABLE IF NOT EXISTS snapshots (
    actor_id       TEXT    NOT NULL,
    seq            BIGINT  NOT NULL,
    handled_seq    BIGINT  NOT NULL,
    type_tag       TEXT    NOT NULL,
    schema_version INTEGER NOT NULL,
    digest         BYTEA   NOT NULL,
    size           BIGINT  NOT NULL,
    created_at     DOUBLE PRECISION NOT NULL,
    data           BYTEA   NOT NULL,
    PRIMARY KEY (actor_id, seq)
);
CREATE TABLE IF NOT EXISTS events (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    actor_id TEXT NOT NULL,
    at       DOUBLE PRECISION NOT NULL,
    kind     TEXT NOT NULL,
    detail   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_actor ON events (actor_id, id);

-- The conditional append, enforced for every writer (this code, another runtime, or SQL
-- typed by hand). Rows of one statement are checked in insertion order, and each sees the
-- summary its predecessors advanced. {actors} is the schema-qualified actors table, so the
-- trigger finds it whatever the writer's search_path.
CREATE OR REPLACE FUNCTION actorlog_entries_append() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_last BIGINT;
BEGIN
    SELECT a.last_seq INTO v_last FROM {actors} a WHERE a.actor_id = NEW.actor_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'actorlog: append to unregistered actor %', NEW.actor_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.seq <> v_last + 1 THEN
        RAISE EXCEPTION 'actorlog: seq conflict for actor %: last seq is %, got seq %',
            NEW.actor_id, v_last, NEW.seq
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    -- Lease/fencing (future format 2): compare the writer's token with the row's here.
    UPDATE {actors} SET
        last_seq = NEW.seq,
        first_seq = CASE WHEN first_seq = 0 THEN NEW.seq ELSE first_seq END,
        last_message_seq = CASE WHEN NEW.kind = 'message' THEN NEW.seq
                                ELSE last_message_seq END,
        handled_seq = CASE WHEN NEW.kind = 'step' AND NEW.ref > handled_seq THEN NEW.ref
                           ELSE handled_seq END
    WHERE actor_id = NEW.actor_id;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS entries_append ON entries;
CREATE TRIGGER entries_append BEFORE INSERT ON entries
    FOR EACH ROW EXECUTE FUNCTION actorlog_entries_append();
"""

#: Schema migrations: ``_MIGRATIONS[v]`` takes a store from format ``v - 1`` to ``v``.
#: They run in the schema they create tables in; ``{actors}`` stands for its actors table.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}

#: Advisory lock held (for the transaction) while the schema is created or migrated.
_SCHEMA_LOCK_KEY = int.from_bytes(b"actorlog", "big")

_ENTRY_COLS = "actor_id, seq, kind, type_tag, ref, message_id, payload, checksum"
_SNAP_INFO_COLS = "actor_id, seq, handled_seq, type_tag, schema_version, digest, size, created_at"
_ACTOR_COLS = "actor_id, actor_type, last_seq, last_message_seq, handled_seq, first_seq, created_at"

# One statement per batch whatever its size: the rows travel as eight arrays. ORDER BY
# ordinality keeps the insertion order, which the trigger's seq check depends on.
_INSERT_ENTRIES = f"""
INSERT INTO entries ({_ENTRY_COLS})
SELECT {_ENTRY_COLS}
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[],
            $7::bytea[], $8::bigint[])
     WITH ORDINALITY AS u({_ENTRY_COLS}, ord)
ORDER BY ord
"""

# deadlock_detected, serialization_failure: the statement was rolled back; try again.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})
_MAX_ATTEMPTS = 3

# Bound the size of one statement (payloads can be up to 8 MiB each).
_MAX_ROWS_PER_STATEMENT = 10_000
_MAX_BYTES_PER_STATEMENT = 64 * 1024 * 1024

#: Driver failures: server errors, client/protocol errors, network errors, timeouts.
_DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)

_Append = tuple[str, int, Sequence[EntryRow]]


def _is_rejection(exc: BaseException) -> bool:
    """True for a conflict the database enforced (SQLSTATE class 23)."""
    sqlstate = getattr(exc, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate.startswith("23")


def _quote_ident(name: str) -> str:
    """An SQL identifier; always quoted, so that keywords and mixed case work too."""
    return '"' + name.replace('"', '""') + '"'


def _redact(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    try:
        parts = urlsplit(dsn)
        if parts.password is None:
            return dsn
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparsable DSN>"


async def _keep_session(conn: Any) -> None:
    """Pool ``reset`` hook that skips asyncpg's ``RESET ALL`` round trip on every release.

    This store never changes session state: no ``SET``, no ``LISTEN``, no cursors, and only
    transaction-scoped advisory locks. asyncpg still rolls back a transaction left open.
    """


def _entry(r: Any) -> EntryRow:
    return EntryRow(r[0], r[1], r[2], r[3], r[4], r[5], bytes(r[6]), r[7])


def _actor(r: Any) -> ActorRow:
    return ActorRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6])


def _info(r: Any) -> SnapshotInfo:
    return SnapshotInfo(r[0], r[1], r[2], r[3], r[4], bytes(r[5]), r[6], r[7])


class PostgresStore:
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
            missing) instead of the first schema of the connection's ``search_path``.
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
        if not isinstance(url_or_dsn, str) or not url_or_dsn:
            raise StoreURLError(str(url_or_dsn), "the URL is empty")
        if schema is not None and (not schema or "\x00" in schema):
            raise ConfigurationError(f"invalid PostgreSQL schema name {schema!r}")
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
        self._committer: GroupCommitter[_Append] = GroupCommitter(self._commit)
        self.batch_sizes: list[int] = []

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(torn_writes=False, multi_process=True, durable=True)

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
        query.append(("search_path", _quote_ident(self.schema)))
        return urlunsplit(parts._replace(query=urlencode(query)))

    def __repr__(self) -> str:
        mode = ", read_only=True" if self.read_only else ""
        return f"PostgresStore({_redact(self.url)!r}{mode})"

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the pool and create or migrate the schema (one transaction, under an
        advisory lock). Idempotent.

        Raises:
            UnsupportedFormatError: the database holds a newer format; nothing was changed.
            StoreUnavailableError: the server cannot be reached, or (read-only) holds no
                actorlog store.
            StoreURLError: the DSN does not parse.
        """
        if self._pool is not None:
            return
        settings: dict[str, str] = {}
        if self.schema is not None:
            settings["search_path"] = _quote_ident(self.schema)
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
            raise StoreURLError(_redact(self.dsn), str(exc)) from exc
        except _DRIVER_ERRORS as exc:
            raise StoreUnavailableError(
                f"cannot connect to PostgreSQL at {_redact(self.dsn)}: {exc}"
            ) from exc
        try:
            async with pool.acquire() as conn:
                if self.read_only:
                    await self._check_read_only(conn)
                else:
                    await self._migrate(conn)
        except BaseException as exc:
            pool.terminate()
            if isinstance(exc, _DRIVER_ERRORS):
                raise StoreUnavailableError(
                    f"cannot open PostgreSQL store {_redact(self.url)}: {exc}"
                ) from exc
            raise
        self._pool = pool

    async def _migrate(self, conn: Any) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK_KEY)
            if self.schema is not None:
                await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote_ident(self.schema)}")
            found = await self._format_version(conn) or 0
            if found > FORMAT_VERSION:
                raise UnsupportedFormatError(found, FORMAT_VERSION)
            if found == FORMAT_VERSION:
                return
            schema = await conn.fetchval("SELECT current_schema()")
            if schema is None:
                raise StoreUnavailableError(
                    f"cannot create actorlog's tables in {_redact(self.url)}: no schema of the "
                    "search_path exists (pass schema=... to have one created)"
                )
            actors = f"{_quote_ident(schema)}.actors"
            for version in range(found + 1, FORMAT_VERSION + 1):
                await conn.execute(_MIGRATIONS[version].replace("{actors}", actors))
            await conn.execute(
                "INSERT INTO actorlog_meta (key, value) VALUES ('format_version', $1) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                str(FORMAT_VERSION),
            )

    async def _check_read_only(self, conn: Any) -> None:
        found = await self._format_version(conn)
        if found is None:
            raise StoreUnavailableError(f"no actorlog store in {_redact(self.url)}")
        if found > FORMAT_VERSION:
            raise UnsupportedFormatError(found, FORMAT_VERSION)

    @staticmethod
    async def _format_version(conn: Any) -> int | None:
        """The stored format version, or None if there is no actorlog schema yet."""
        if await conn.fetchval("SELECT to_regclass('actorlog_meta')") is None:
            return None
        value = await conn.fetchval("SELECT value FROM actorlog_meta WHERE key = 'format_version'")
        return None if value is None else int(value)

    async def close(self) -> None:
        """Wait for commits in flight (up to 10 s), then close every connection. Idempotent."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        with anyio.move_on_after(10, shield=True) as scope:
            try:
                await pool.close()
            except _DRIVER_ERRORS:
                pool.terminate()
        if scope.cancelled_caught:
            pool.terminate()

    def _open_pool(self) -> Any:
        if self._pool is None:
            raise StoreClosedError(f"PostgreSQL store {_redact(self.url)} is not open")
        return self._pool

    def _writable_pool(self) -> Any:
        pool = self._open_pool()
        if self.read_only:
            raise StoreClosedError(f"PostgreSQL store {_redact(self.url)} is open read-only")
        return pool

    def _failure(self, what: str, exc: BaseException) -> StoreError:
        """Translate a driver error: closed if the store was closed meanwhile."""
        if self._pool is None:
            return StoreClosedError(f"PostgreSQL store {_redact(self.url)} is closed")
        return StoreUnavailableError(f"PostgreSQL {what} failed: {type(exc).__name__}: {exc}")

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        pool = self._open_pool()
        try:
            return list(await pool.fetch(sql, *args))
        except _DRIVER_ERRORS as exc:
            raise self._failure("read", exc) from exc

    async def _execute(self, sql: str, *args: Any) -> None:
        pool = self._writable_pool()
        try:
            await pool.execute(sql, *args)
        except _DRIVER_ERRORS as exc:
            raise self._failure("write", exc) from exc

    # -- actors ----------------------------------------------------------------------------

    async def register_actor(self, actor_id: str, actor_type: str) -> ActorRow:
        await self._execute(
            "INSERT INTO actors (actor_id, actor_type, created_at) VALUES ($1, $2, $3) "
            "ON CONFLICT (actor_id) DO NOTHING",
            actor_id,
            actor_type,
            time.time(),
        )
        row = await self.get_actor(actor_id)
        assert row is not None  # actors are never deleted
        return row

    async def get_actor(self, actor_id: str) -> ActorRow | None:
        rows = await self._fetch(f"SELECT {_ACTOR_COLS} FROM actors WHERE actor_id = $1", actor_id)
        return _actor(rows[0]) if rows else None

    async def list_actors(self) -> list[ActorRow]:
        rows = await self._fetch(f"SELECT {_ACTOR_COLS} FROM actors ORDER BY actor_id")
        return [_actor(r) for r in rows]

    # -- the log ---------------------------------------------------------------------------

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        """Atomically append ``rows`` after ``expected_last_seq`` (see ``Store.append``).

        Concurrent calls share one transaction (group commit). A cancelled call may or may
        not have committed.
        """
        for i, row in enumerate(rows, start=1):
            if row.actor_id != actor_id or row.seq != expected_last_seq + i:
                raise SequenceConflictError(actor_id, expected_last_seq, None)
        self._writable_pool()
        if not rows:
            return
        await self._committer.submit((actor_id, expected_last_seq, rows))

    async def _commit(self, batch: Sequence[Request[_Append]]) -> None:
        """Commit a batch: one statement (one transaction) per chunk of requests."""
        self.batch_sizes.append(len(batch))
        if len(self.batch_sizes) > 1024:
            del self.batch_sizes[:512]
        pool = self._pool
        if pool is None or self.read_only:
            for req in batch:
                req.error = StoreClosedError(f"PostgreSQL store {_redact(self.url)} is closed")
            return
        try:
            conn = await pool.acquire()
        except _DRIVER_ERRORS as exc:
            err = self._failure("commit", exc)
            err.__cause__ = exc
            for req in batch:
                req.error = err
            return
        try:
            chunk: list[Request[_Append]] = []
            n_rows = n_bytes = 0
            for req in batch:
                rows = req.item[2]
                size = sum(len(r.payload) for r in rows)
                if chunk and (
                    n_rows + len(rows) > _MAX_ROWS_PER_STATEMENT
                    or n_bytes + size > _MAX_BYTES_PER_STATEMENT
                ):
                    await self._commit_chunk(conn, chunk)
                    chunk, n_rows, n_bytes = [], 0, 0
                chunk.append(req)
                n_rows += len(rows)
                n_bytes += size
            if chunk:
                await self._commit_chunk(conn, chunk)
        finally:
            with contextlib.suppress(*_DRIVER_ERRORS):  # the pool discards a broken one
                await pool.release(conn)

    async def _commit_chunk(self, conn: Any, chunk: Sequence[Request[_Append]]) -> None:
        # Lock actors' rows in one global order (by actor id) so that two runtimes
        # committing overlapping batches cannot deadlock; the sort is stable, so each
        # actor's rows keep their order.
        rows = sorted((row for req in chunk for row in req.item[2]), key=lambda r: r.actor_id)
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            try:
                await self._insert_entries(conn, rows)
                return
            except _DRIVER_ERRORS as exc:
                if _is_rejection(exc):
                    await self._isolate(conn, chunk, exc)
                    return
                # A writer that locks in another order can still deadlock with us; the
                # statement was rolled back as a whole, so trying again is safe.
                if getattr(exc, "sqlstate", None) in _RETRY_SQLSTATES and attempt < _MAX_ATTEMPTS:
                    continue
                err = self._failure("commit", exc)
                err.__cause__ = exc
                for req in chunk:
                    req.error = err
                return

    async def _isolate(
        self, conn: Any, chunk: Sequence[Request[_Append]], exc: BaseException
    ) -> None:
        """The database rejected ``chunk``: fail the conflicting requests, commit the rest."""
        if len(chunk) == 1:
            actor_id, expected, _ = chunk[0].item
            conflict = SequenceConflictError(
                actor_id, expected, await self._last_seq(conn, actor_id)
            )
            conflict.__cause__ = exc
            chunk[0].error = conflict
            return
        # Someone in the batch lost a race; find out who by committing one by one.
        for req in chunk:
            await self._commit_chunk(conn, [req])

    @staticmethod
    async def _insert_entries(conn: Any, rows: Sequence[EntryRow]) -> None:
        """Insert ``rows`` in one statement: one round trip, one atomic transaction.

        The single place rows reach the database (a fencing token would travel here too).
        """
        await conn.execute(
            _INSERT_ENTRIES,
            [r.actor_id for r in rows],
            [r.seq for r in rows],
            [r.kind for r in rows],
            [r.type_tag for r in rows],
            [r.ref for r in rows],
            [r.message_id for r in rows],
            [r.payload for r in rows],
            [r.checksum for r in rows],
        )

    @staticmethod
    async def _last_seq(conn: Any, actor_id: str) -> int | None:
        try:
            value = await conn.fetchval("SELECT last_seq FROM actors WHERE actor_id = $1", actor_id)
        except _DRIVER_ERRORS:
            return None
        return None if value is None else int(value)

    async def read(
        self,
        actor_id: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[EntryRow]:
        sql = f"SELECT {_ENTRY_COLS} FROM entries WHERE actor_id = $1 AND seq > $2"
        args: list[Any] = [actor_id, after_seq]
        if upto_seq is not None:
            args.append(upto_seq)
            sql += f" AND seq <= ${len(args)}"
        if kinds is not None:
            args.append(list(kinds))
            sql += f" AND kind = ANY(${len(args)}::text[])"
        sql += " ORDER BY seq"
        if limit is not None:
            args.append(limit)
            sql += f" LIMIT ${len(args)}"
        return [_entry(r) for r in await self._fetch(sql, *args)]

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        rows = await self._fetch(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE actor_id = $1 AND message_id = $2",
            actor_id,
            message_id,
        )
        return _entry(rows[0]) if rows else None

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        rows = await self._fetch(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE actor_id = $1 AND kind = $2 AND ref = $3 "
            "ORDER BY seq",
            actor_id,
            kind,
            ref,
        )
        return [_entry(r) for r in rows]

    # -- snapshots -------------------------------------------------------------------------

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        i = snapshot.info
        await self._execute(
            f"INSERT INTO snapshots ({_SNAP_INFO_COLS}, data) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
            "ON CONFLICT (actor_id, seq) DO UPDATE SET "
            "handled_seq = EXCLUDED.handled_seq, type_tag = EXCLUDED.type_tag, "
            "schema_version = EXCLUDED.schema_version, digest = EXCLUDED.digest, "
            "size = EXCLUDED.size, created_at = EXCLUDED.created_at, data = EXCLUDED.data",
            i.actor_id,
            i.seq,
            i.handled_seq,
            i.type_tag,
            i.schema_version,
            i.digest,
            i.size,
            i.created_at,
            snapshot.data,
        )

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        rows = await self._fetch(
            f"SELECT {_SNAP_INFO_COLS} FROM snapshots WHERE actor_id = $1 ORDER BY seq DESC",
            actor_id,
        )
        return [_info(r) for r in rows]

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        rows = await self._fetch(
            f"SELECT {_SNAP_INFO_COLS}, data FROM snapshots WHERE actor_id = $1 AND seq = $2",
            actor_id,
            seq,
        )
        if not rows:
            return None
        return SnapshotRow(info=_info(rows[0]), data=bytes(rows[0][8]))

    async def delete_snapshots(self, actor_id: str, seqs: Sequence[int]) -> None:
        if seqs:
            await self._execute(
                "DELETE FROM snapshots WHERE actor_id = $1 AND seq = ANY($2::bigint[])",
                actor_id,
                list(seqs),
            )

    # -- operator history ------------------------------------------------------------------

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        await self._execute(
            "INSERT INTO events (actor_id, at, kind, detail) VALUES ($1, $2, $3, $4)",
            actor_id,
            time.time(),
            kind,
            detail,
        )

    async def read_events(self, actor_id: str) -> list[EventRow]:
        rows = await self._fetch(
            "SELECT actor_id, at, kind, detail FROM events WHERE actor_id = $1 ORDER BY id",
            actor_id,
        )
        return [EventRow(r[0], r[1], r[2], r[3]) for r in rows]
