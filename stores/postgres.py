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

Ownership across runtimes (leases with fencing tokens, DESIGN.md section 7; schema
migration 2, ``docs/scaling.md``):

* ``leases(actor_id, owner, expires_at, token)``: a runtime takes an actor's lease if it is
  free or expired (:meth:`PostgresStore.acquire_lease`), which bumps the actor's fencing
  token; it renews it before it expires. Expiry is computed with the *database's* clock
  (``now()``), so runtimes' clocks may disagree; only their timers' rates matter.
* Every append of a lease holder carries its token (``entries.fence``; registered per actor
  with :meth:`PostgresStore.set_fence`, or ``append(..., fence=token)``); the append trigger,
  holding the actor's row lock, rejects a row whose token is not the actor's current one
  (SQLSTATE ``23AL1`` -> :class:`~actorlog.LeaseLostError`). Acquiring a lease takes the
  same row lock, so a takeover and a zombie's append are serialized: the zombie's append
  either commits before the new owner reads the log, or is rejected.
* ``inbox``: messages for an actor owned by another runtime wait here until its owner logs
  them (``NOTIFY actorlog_inbox`` wakes it; owners also poll). Once the step of such a
  message is durable, its owner announces it (:meth:`PostgresStore.notify_replies`,
  ``NOTIFY actorlog_reply``), which wakes the ``ask`` waiting on another runtime.
  Both channels share one listener connection per store, re-established after a drop.

Schema versions are counted apart from the log format (``actorlog_meta.schema_version``).

asyncpg runs on asyncio only.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import asyncpg
from actorlog.store import (
    FORMAT_VERSION,
    ActorRow,
    ConfigurationError,
    CorruptEntryError,
    EntryRow,
    EventRow,
    InboxRow,
    LeaseLostError,
    OrphanRow,
    SequenceConflictError,
    SnapshotInfo,
    SnapshotRow,
    StoreCapabilities,
    StoreClosedError,
    StoreError,
    StoreUnavailableError,
    StoreURLError,
    UnsupportedFormatError,
    actor_row,
    entry_row,
    event_row,
    snapshot_data,
    snapshot_info,
)

from ._groupcommit import GroupCommitter, Request, require_asyncio

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

_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS leases (
    actor_id   TEXT PRIMARY KEY,
    owner      TEXT,
    expires_at TIMESTAMPTZ NOT NULL,
    token      BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS leases_owner ON leases (owner);
ALTER TABLE entries ADD COLUMN IF NOT EXISTS fence BIGINT;
CREATE TABLE IF NOT EXISTS inbox (
    id         BIGINT GENERATED ALWAYS AS IDENTITY,
    actor_id   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    type_tag   TEXT NOT NULL,
    body       TEXT NOT NULL,
    sender     TEXT,
    PRIMARY KEY (actor_id, message_id)
);
CREATE INDEX IF NOT EXISTS inbox_order ON inbox (actor_id, id);

-- Format 1's trigger plus the fencing check: a row that carries a token (entries.fence) is
-- rejected unless the token is the actor's current one. It runs after the actor's row lock
-- is taken, which acquire_lease also takes, so it sees any takeover committed before it.
CREATE OR REPLACE FUNCTION actorlog_entries_append() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_last  BIGINT;
    v_token BIGINT;
BEGIN
    SELECT a.last_seq INTO v_last FROM {actors} a WHERE a.actor_id = NEW.actor_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'actorlog: append to unregistered actor %', NEW.actor_id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.fence IS NOT NULL THEN
        SELECT l.token INTO v_token FROM {leases} l WHERE l.actor_id = NEW.actor_id;
        IF v_token IS DISTINCT FROM NEW.fence THEN
            RAISE EXCEPTION 'actorlog: fenced append to actor %: token % is not the current %',
                NEW.actor_id, NEW.fence, v_token
                USING ERRCODE = '23AL1';
        END IF;
    END IF;
    IF NEW.seq <> v_last + 1 THEN
        RAISE EXCEPTION 'actorlog: seq conflict for actor %: last seq is %, got seq %',
            NEW.actor_id, v_last, NEW.seq
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
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
"""

# Version 3: index only step rows by ref (the runtime's lookup: the step of a message). The
# full (actor_id, kind, ref) index cost every appended row an index entry on a page of its
# own actor; other lookups by ref scan the actor's log after ref (a ref always points back).
_SCHEMA_V3 = """
CREATE INDEX IF NOT EXISTS entries_step ON entries (actor_id, ref) WHERE kind = 'step';
DROP INDEX IF EXISTS entries_ref;
"""

#: Schema migrations: ``_MIGRATIONS[v]`` takes a store from schema version ``v - 1`` to
#: ``v``. They run in the schema they create tables in; ``{actors}`` and ``{leases}`` stand
#: for its tables. Version 1 is log format 1; version 2 adds leases, fencing and the inbox;
#: version 3 narrows the ref index to step rows.
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3}
_SCHEMA_VERSION = max(_MIGRATIONS)

#: The WHERE clause of a fenced ``INSERT ... SELECT``: true if the statement's fencing
#: token (parameter ``$n``; NULL: unfenced) is the actor's current one (``$1``), with the
#: lease row share-locked so that a take-over waits for the statement; none otherwise.
_FENCE_WHERE = (
    "WHERE (${n}::bigint IS NULL OR EXISTS (SELECT 1 FROM leases "
    "WHERE actor_id = $1 AND token = ${n} FOR SHARE))"
)

#: SQLSTATE of a fenced append rejected by the trigger (class 23: a rejection).
_FENCED_SQLSTATE = "23AL1"
#: NOTIFY channel that wakes the owner of an actor with new inbox messages (payload: id).
INBOX_CHANNEL = "actorlog_inbox"
#: NOTIFY channel announcing durable steps of messages that came through the inbox, so that
#: the asking runtime reads the reply at once (payload: JSON ``[[actor_id, message_id], ...]``).
REPLY_CHANNEL = "actorlog_reply"

#: Advisory lock held (for the transaction) while the schema is created or migrated.
_SCHEMA_LOCK_KEY = int.from_bytes(b"actorlog", "big")

_ENTRY_COLS = "actor_id, seq, kind, type_tag, ref, message_id, payload, checksum"
_SNAP_INFO_COLS = "actor_id, seq, handled_seq, type_tag, schema_version, digest, size, created_at"
_ACTOR_COLS = "actor_id, actor_type, last_seq, last_message_seq, handled_seq, first_seq, created_at"

# One statement per batch whatever its size: the rows travel as nine arrays. ORDER BY
# ordinality keeps the insertion order, which the trigger's seq check depends on.
_INSERT_ENTRIES = f"""
INSERT INTO entries ({_ENTRY_COLS}, fence)
SELECT {_ENTRY_COLS}, fence
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[],
            $7::bytea[], $8::bigint[], $9::bigint[])
     WITH ORDINALITY AS u({_ENTRY_COLS}, fence, ord)
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

_Append = tuple[str, int, Sequence[EntryRow], int | None]  # actor, expected, rows, fence


def _is_bad_input(exc: BaseException) -> bool:
    """True for a value the driver refused to send: asyncpg raises its DataError (a server
    error class) from the encoding error, before anything reaches the server."""
    if isinstance(exc, asyncpg.InterfaceError) and isinstance(exc, ValueError):
        return True
    return isinstance(exc, asyncpg.DataError) and isinstance(
        exc.__cause__, (ValueError, OverflowError, TypeError)
    )


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

    This store never changes session state on pooled connections: no ``SET``, no ``LISTEN``
    (the listener, :meth:`PostgresStore.listen_inbox`, has its own connection), no cursors, and only
    transaction-scoped advisory locks. asyncpg still rolls back a transaction left open.
    """


# Rows are built by actorlog.store's checked constructors (every column type-checked, as in
# every store): the server enforces its column types, but a wrong one must never become an
# internal TypeError.


def _entries(rows: Sequence[Any], actor_id: str, after_seq: int = 0) -> list[EntryRow]:
    out: list[EntryRow] = []
    for r in rows:
        seq = (out[-1].seq if out else after_seq) + 1
        out.append(entry_row(tuple(r), actor_id=actor_id, seq=seq))
    return out


#: PostgreSQL truncates identifiers to 63 bytes (NAMEDATALEN - 1): two longer schema names
#: with the same first 63 bytes would silently share one store.
_MAX_IDENTIFIER_BYTES = 63


def _schema_from_url(dsn: str, schema: str | None) -> tuple[str, str | None]:
    """Take ``?schema=NAME`` out of a URL (the server would reject it as an unknown
    setting): ``(dsn without it, schema)``."""
    if "?" not in dsn or "schema=" not in dsn:
        return dsn, schema
    try:
        parts = urlsplit(dsn)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return dsn, schema
    names = {v for k, v in query if k == "schema"}
    if not names:
        return dsn, schema
    if len(names) > 1 or (schema is not None and names != {schema}):
        raise ConfigurationError(
            f"conflicting PostgreSQL schemas: {sorted(n for n in names | {schema} if n)!r} "
            "(give one, as ?schema= or as schema=)"
        )
    rest = urlencode([kv for kv in query if kv[0] != "schema"])
    return urlunsplit(parts._replace(query=rest)), names.pop()


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
        url_or_dsn, schema = _schema_from_url(url_or_dsn, schema)
        if schema is not None and (not schema or "\x00" in schema):
            raise ConfigurationError(f"invalid PostgreSQL schema name {schema!r}")
        if schema is not None and len(schema.encode("utf-8", "replace")) > _MAX_IDENTIFIER_BYTES:
            raise ConfigurationError(
                f"PostgreSQL schema name {schema!r} is {len(schema.encode('utf-8', 'replace'))} "
                f"bytes long; PostgreSQL cuts identifiers to {_MAX_IDENTIFIER_BYTES} bytes, so "
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
        self._committer: GroupCommitter[_Append] = GroupCommitter(self._commit)
        self.batch_sizes: list[int] = []
        self._fences: dict[str, int] = {}
        self._listener: _Listener | None = None

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(torn_writes=False, multi_process=True, durable=True, leases=True)

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
            ConfigurationError: not running on asyncio (asyncpg needs it).
        """
        if self._pool is not None:
            return
        require_asyncio("PostgresStore")
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
            have = await self._schema_version(conn) if found else 0
            if have > _SCHEMA_VERSION:
                raise UnsupportedFormatError(have, _SCHEMA_VERSION)
            if found == FORMAT_VERSION and have == _SCHEMA_VERSION:
                return
            schema = await conn.fetchval("SELECT current_schema()")
            if schema is None:
                raise StoreUnavailableError(
                    f"cannot create actorlog's tables in {_redact(self.url)}: no schema of the "
                    "search_path exists (pass schema=... to have one created)"
                )
            actors = f"{_quote_ident(schema)}.actors"
            leases = f"{_quote_ident(schema)}.leases"
            for version in range(have + 1, _SCHEMA_VERSION + 1):
                sql = _MIGRATIONS[version].replace("{actors}", actors)
                await conn.execute(sql.replace("{leases}", leases))
            await conn.execute(
                "INSERT INTO actorlog_meta (key, value) VALUES ('format_version', $1), "
                "('schema_version', $2) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                str(FORMAT_VERSION),
                str(_SCHEMA_VERSION),
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

    @staticmethod
    async def _schema_version(conn: Any) -> int:
        """The schema migration version (1 for stores written before it was recorded)."""
        value = await conn.fetchval("SELECT value FROM actorlog_meta WHERE key = 'schema_version'")
        return 1 if value is None else int(value)

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

    def _failure(self, what: str, exc: BaseException) -> StoreError | ConfigurationError:
        """Translate a driver error: closed if the store was closed meanwhile; a value the
        driver cannot send (text with a lone surrogate, an integer beyond 64 bits) is the
        caller's ``ConfigurationError``, not a transient failure."""
        if self._pool is None:
            return StoreClosedError(f"PostgreSQL store {_redact(self.url)} is closed")
        if _is_bad_input(exc):
            return ConfigurationError(f"PostgreSQL cannot take a value of this {what}: {exc}")
        return StoreUnavailableError(f"PostgreSQL {what} failed: {type(exc).__name__}: {exc}")

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        pool = self._open_pool()
        try:
            return list(await pool.fetch(sql, *args))
        except _DRIVER_ERRORS as exc:
            raise self._failure("read", exc) from exc

    async def _execute_count(self, sql: str, *args: Any) -> int:
        """Execute a write; return how many rows it affected."""
        pool = self._writable_pool()
        try:
            status = await pool.execute(sql, *args)
        except _DRIVER_ERRORS as exc:
            raise self._failure("write", exc) from exc
        return int(str(status).rsplit(" ", 1)[-1])

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
        return actor_row(tuple(rows[0])) if rows else None

    async def list_actors(self) -> list[ActorRow]:
        rows = await self._fetch(f"SELECT {_ACTOR_COLS} FROM actors ORDER BY actor_id")
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
        rows = sorted(
            ((row, req.item[3]) for req in chunk for row in req.item[2]),
            key=lambda rf: rf[0].actor_id,
        )
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            try:
                await self._insert_entries(conn, rows)
                return
            except _DRIVER_ERRORS as exc:
                if _is_rejection(exc) or (_is_bad_input(exc) and len(chunk) > 1):
                    await self._isolate(conn, chunk, exc)  # bad input: only its own append fails
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
            actor_id, expected, _, fence = chunk[0].item
            conflict: SequenceConflictError | CorruptEntryError
            if getattr(exc, "sqlstate", None) == _FENCED_SQLSTATE:
                conflict = LeaseLostError(actor_id, fence, await self._token(conn, actor_id))
            elif _is_bad_input(exc):
                chunk[0].error = self._failure("append", exc)
                return
            else:
                conflict = await self._conflict(conn, actor_id, expected)
            conflict.__cause__ = exc
            chunk[0].error = conflict
            return
        # Someone in the batch lost a race; find out who by committing one by one.
        for req in chunk:
            await self._commit_chunk(conn, [req])

    @staticmethod
    async def _insert_entries(conn: Any, rows: Sequence[tuple[EntryRow, int | None]]) -> None:
        """Insert ``rows`` (with their fencing tokens) in one statement: one round trip, one
        atomic transaction. The single place rows reach the database."""
        await conn.execute(
            _INSERT_ENTRIES,
            [r.actor_id for r, _ in rows],
            [r.seq for r, _ in rows],
            [r.kind for r, _ in rows],
            [r.type_tag for r, _ in rows],
            [r.ref for r, _ in rows],
            [r.message_id for r, _ in rows],
            [r.payload for r, _ in rows],
            [r.checksum for r, _ in rows],
            [f for _, f in rows],
        )

    @staticmethod
    async def _token(conn: Any, actor_id: str) -> int | None:
        try:
            value = await conn.fetchval("SELECT token FROM leases WHERE actor_id = $1", actor_id)
        except _DRIVER_ERRORS:
            return None
        return None if value is None else int(value)

    @staticmethod
    async def _conflict(
        conn: Any, actor_id: str, expected: int
    ) -> SequenceConflictError | CorruptEntryError:
        """A conflict, unless the actor's summary (``actors.last_seq``, which the trigger
        checks) disagrees with its log: that is damage, not another runtime (one statement,
        so both are read at one moment)."""
        try:
            row = await conn.fetchrow(
                "SELECT a.last_seq, (SELECT max(e.seq) FROM entries e WHERE e.actor_id = $1) "
                "FROM actors a WHERE a.actor_id = $1",
                actor_id,
            )
        except _DRIVER_ERRORS:
            row = None
        if row is None:
            return SequenceConflictError(actor_id, expected, None)
        found, real = row[0], row[1] or 0
        if found != real:
            return CorruptEntryError(
                actor_id,
                found,
                "seq chain",
                f"the actor's summary (actors.last_seq) says {found} but the log ends at seq "
                f"{real}; nothing was written",
            )
        return SequenceConflictError(actor_id, expected, found)

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
        return _entries(await self._fetch(sql, *args), actor_id, after_seq)

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        rows = await self._fetch(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE actor_id = $1 AND message_id = $2",
            actor_id,
            message_id,
        )
        return entry_row(tuple(rows[0]), actor_id=actor_id) if rows else None

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        if kind == "step":  # a literal, so the partial index applies to every plan
            rows = await self._fetch(
                f"SELECT {_ENTRY_COLS} FROM entries "
                "WHERE actor_id = $1 AND kind = 'step' AND ref = $2 ORDER BY seq",
                actor_id,
                ref,
            )
        else:  # operators' tools: a ref always points back, so scan the log after it
            rows = await self._fetch(
                f"SELECT {_ENTRY_COLS} FROM entries "
                "WHERE actor_id = $1 AND seq > $2 AND kind = $3 AND ref = $2 ORDER BY seq",
                actor_id,
                ref,
                kind,
            )
        return _entries(rows, actor_id, ref)

    # -- snapshots -------------------------------------------------------------------------

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        """Write (or replace) a snapshot. Fenced like appends (see :meth:`record_event`):
        raises :class:`~actorlog.LeaseLostError` if this store's token for the actor is
        no longer the current one, and writes nothing."""
        i = snapshot.info
        fence = self._fences.get(i.actor_id)
        written = await self._execute_count(
            f"INSERT INTO snapshots ({_SNAP_INFO_COLS}, data) "
            "SELECT $1::text, $2::bigint, $3::bigint, $4::text, $5::integer, $6::bytea, "
            "$7::bigint, $8::float8, $9::bytea "
            f"{_FENCE_WHERE.format(n=10)} "
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
            fence,
        )
        if not written:
            raise LeaseLostError(i.actor_id, fence, None)

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        rows = await self._fetch(
            f"SELECT {_SNAP_INFO_COLS} FROM snapshots WHERE actor_id = $1 ORDER BY seq DESC",
            actor_id,
        )
        return [snapshot_info(tuple(r), actor_id=actor_id) for r in rows]

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        rows = await self._fetch(
            f"SELECT {_SNAP_INFO_COLS}, data FROM snapshots WHERE actor_id = $1 AND seq = $2",
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
                f"AND {_FENCE_WHERE.format(n=3)[6:]}",
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
        except _DRIVER_ERRORS as exc:
            raise self._failure("read", exc) from exc
        try:
            tr = conn.transaction(isolation="repeatable_read", readonly=True)
            try:
                await tr.start()
            except _DRIVER_ERRORS as exc:
                raise self._failure("read", exc) from exc
            view = copy.copy(self)
            view._pool = conn  # asyncpg: a connection fetches like a pool
            view._listener = None
            view.read_only = True
            try:
                yield view
            finally:
                view._pool = None
                with anyio.CancelScope(shield=True), contextlib.suppress(*_DRIVER_ERRORS):
                    await tr.rollback()
        finally:
            with anyio.CancelScope(shield=True), contextlib.suppress(*_DRIVER_ERRORS):
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
            f"SELECT $1::text, $2::float8, $3::text, $4::text {_FENCE_WHERE.format(n=5)}",
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

    # -- ownership: leases, fencing tokens, the inbox (docs/scaling.md) -------------------

    def set_fence(self, actor_id: str, token: int | None) -> None:
        """Carry ``token`` with every later append to ``actor_id`` from this store instance
        (``None``: stop fencing; only once this runtime no longer writes the actor)."""
        if token is None:
            self._fences.pop(actor_id, None)
        else:
            self._fences[actor_id] = token

    async def acquire_lease(self, actor_id: str, owner: str, ttl: float) -> int | None:
        """Take the actor's lease for ``ttl`` seconds if it is free, expired or already
        ``owner``'s; return the new fencing token (the previous one + 1), or None if another
        owner holds a live lease. Expiry uses the database's clock.

        Takes the actor's row lock (as appends do), so an append fenced with the old token
        that commits after this returns is rejected.
        """
        pool = self._writable_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT 1 FROM actors WHERE actor_id = $1 FOR UPDATE", actor_id)
                token = await conn.fetchval(
                    "INSERT INTO leases AS l (actor_id, owner, expires_at, token) "
                    "VALUES ($1, $2, now() + make_interval(secs => $3), 1) "
                    "ON CONFLICT (actor_id) DO UPDATE SET owner = EXCLUDED.owner, "
                    "expires_at = EXCLUDED.expires_at, token = l.token + 1 "
                    "WHERE l.owner IS NULL OR l.expires_at <= now() OR l.owner = EXCLUDED.owner "
                    "RETURNING l.token",
                    actor_id,
                    owner,
                    float(ttl),
                )
        except _DRIVER_ERRORS as exc:
            raise self._failure("acquire_lease", exc) from exc
        return None if token is None else int(token)

    async def renew_lease(self, actor_id: str, owner: str, token: int, ttl: float) -> bool:
        """Extend the lease to now + ``ttl`` if ``owner`` still holds it with ``token``.
        False if another runtime took it over (an expired lease nobody took is renewed)."""
        return actor_id in await self.renew_leases(owner, {actor_id: token}, ttl)

    async def renew_leases(self, owner: str, tokens: Mapping[str, int], ttl: float) -> set[str]:
        """Renew many leases in one statement; return the ids whose lease was renewed."""
        if not tokens:
            return set()
        pool = self._writable_pool()
        try:
            rows = await pool.fetch(
                "UPDATE leases AS l SET expires_at = now() + make_interval(secs => $4) "
                "FROM unnest($2::text[], $3::bigint[]) AS u(actor_id, token) "
                "WHERE l.actor_id = u.actor_id AND l.token = u.token AND l.owner = $1 "
                "RETURNING l.actor_id",
                owner,
                list(tokens),
                list(tokens.values()),
                float(ttl),
            )
        except _DRIVER_ERRORS as exc:
            raise self._failure("renew_leases", exc) from exc
        return {r[0] for r in rows}

    async def release_lease(self, actor_id: str, owner: str, token: int) -> None:
        """Give the lease up at once (the token stays: the next owner gets token + 1)."""
        await self._execute(
            "UPDATE leases SET owner = NULL, expires_at = now() "
            "WHERE actor_id = $1 AND owner = $2 AND token = $3",
            actor_id,
            owner,
            token,
        )

    async def get_lease(self, actor_id: str) -> tuple[str | None, int, float] | None:
        """``(owner, token, seconds until expiry)`` (owner None or seconds <= 0: free), or
        None if the actor never had a lease."""
        rows = await self._fetch(
            "SELECT owner, token, EXTRACT(EPOCH FROM expires_at - now())::float8 "
            "FROM leases WHERE actor_id = $1",
            actor_id,
        )
        if not rows:
            return None
        return rows[0][0], int(rows[0][1]), float(rows[0][2])

    async def list_leases(self) -> list[tuple[str, str | None, int, float]]:
        """Every lease: ``(actor_id, owner, token, seconds until expiry)`` by actor id
        (owner None or seconds <= 0: free)."""
        rows = await self._fetch(
            "SELECT actor_id, owner, token, EXTRACT(EPOCH FROM expires_at - now())::float8 "
            "FROM leases ORDER BY actor_id"
        )
        return [(r[0], r[1], int(r[2]), float(r[3])) for r in rows]

    async def orphans(self, limit: int = 100, owner: str | None = None) -> list[OrphanRow]:
        """``(actor_id, actor_type)`` of actors with unfinished work (unhandled messages or
        inbox messages) and no live lease: a dead runtime's actors, or never placed. With
        ``owner``, also those whose live lease ``owner`` holds (a runtime restarted under the
        same name after a crash)."""
        rows = await self._fetch(
            "SELECT a.actor_id, a.actor_type FROM actors a "
            "LEFT JOIN leases l ON l.actor_id = a.actor_id "
            "WHERE (l.actor_id IS NULL OR l.owner IS NULL OR l.expires_at <= now() "
            "       OR l.owner = $2) "
            "AND (a.handled_seq < a.last_message_seq "
            "     OR EXISTS (SELECT 1 FROM inbox i WHERE i.actor_id = a.actor_id)) "
            "ORDER BY random() LIMIT $1",
            limit,
            owner,
        )
        return [OrphanRow(r[0], r[1]) for r in rows]

    async def inbox_put(
        self, actor_id: str, message_id: str, type_tag: str, body: str, sender: str | None
    ) -> None:
        """Durably queue a message for the actor's owner (once per message id) and notify."""
        pool = self._writable_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    "INSERT INTO inbox (actor_id, message_id, type_tag, body, sender) "
                    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    actor_id,
                    message_id,
                    type_tag,
                    body,
                    sender,
                )
                await conn.execute("SELECT pg_notify($1, $2)", INBOX_CHANNEL, actor_id)
        except _DRIVER_ERRORS as exc:
            raise self._failure("inbox_put", exc) from exc

    async def inbox_for(self, owner: str, limit: int = 500) -> list[InboxRow]:
        """Queued messages of actors whose lease ``owner`` holds, oldest first:
        ``(actor_id, message_id, type_tag, body, sender)``."""
        rows = await self._fetch(
            "SELECT i.actor_id, i.message_id, i.type_tag, i.body, i.sender FROM inbox i "
            "JOIN leases l ON l.actor_id = i.actor_id WHERE l.owner = $1 ORDER BY i.id LIMIT $2",
            owner,
            limit,
        )
        return [InboxRow(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    async def inbox_delete(self, actor_id: str, message_id: str) -> None:
        """Drop a queued message once it is in the actor's log."""
        await self._execute(
            "DELETE FROM inbox WHERE actor_id = $1 AND message_id = $2", actor_id, message_id
        )

    async def listen_inbox(self, callback: Callable[[str], None]) -> Callable[[], Awaitable[None]]:
        """Call ``callback(actor_id)`` on every inbox notification. Returns an async function
        that stops listening. Notifications can be lost (connection drops): owners poll as
        well. Shares the store's one listener connection with :meth:`listen_replies`."""

        def on_payload(payload: str | None) -> None:
            if payload is not None:
                callback(payload)

        return await self._listen(INBOX_CHANNEL, on_payload)

    async def notify_replies(self, replies: Sequence[tuple[str, str]]) -> None:
        """Announce that the steps of these ``(actor_id, message_id)`` messages are durable
        (``NOTIFY actorlog_reply``), so that runtimes waiting on them read their replies now.

        Call it only once the steps are durable: a notification is a promise that the log
        holds the reply. One statement (one transaction) for the whole batch; pairs are packed
        into as few payloads as NOTIFY's 8000-byte limit allows."""
        payloads = _reply_payloads(replies)
        if not payloads:
            return
        pool = self._writable_pool()
        try:
            await pool.execute(
                "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", REPLY_CHANNEL, payloads
            )
        except _DRIVER_ERRORS as exc:
            raise self._failure("notify_replies", exc) from exc

    async def listen_replies(
        self, callback: Callable[[str | None, str | None], None]
    ) -> Callable[[], Awaitable[None]]:
        """Call ``callback(actor_id, message_id)`` for every reply announced with
        :meth:`notify_replies` (by any runtime on this database). ``message_id`` is None when
        it did not fit in a notification: any message of the actor may have its reply.
        ``callback(None, None)`` after the listener reconnected: notifications may have been
        lost meanwhile, so every waiting ask should look at the log. Returns an async function
        that stops listening."""

        def on_payload(payload: str | None) -> None:
            if payload is None:
                callback(None, None)
                return
            for actor_id, message_id in _parse_reply_payload(payload):
                callback(actor_id, message_id)

        return await self._listen(REPLY_CHANNEL, on_payload)

    async def _listen(
        self, channel: str, on_payload: Callable[[str | None], None]
    ) -> Callable[[], Awaitable[None]]:
        self._open_pool()
        if self._listener is None:
            self._listener = _Listener(self)
        listener = self._listener
        await listener.add(channel, on_payload)

        async def stop() -> None:
            await listener.remove(channel, on_payload)
            if listener.idle() and self._listener is listener:
                self._listener = None

        return stop

    async def _listen_connect(self) -> Any:
        settings = {"search_path": _quote_ident(self.schema)} if self.schema else {}
        settings["application_name"] = "actorlog-listen"
        try:
            return await asyncpg.connect(
                self.dsn, server_settings=settings, timeout=_LISTEN_CONNECT_TIMEOUT
            )
        except _DRIVER_ERRORS as exc:
            raise self._failure("listen", exc) from exc


#: Largest NOTIFY payload we send (PostgreSQL's limit is "shorter than 8000 bytes").
_MAX_PAYLOAD_BYTES = 7900
#: Listener reconnection: first delay, longest delay (seconds), and how often an idle
#: listener connection is checked (a dead peer without a FIN is noticed only by a query).
_RELISTEN_FIRST = 0.05
_RELISTEN_MAX = 5.0
_LISTEN_CHECK_EVERY = 15.0
_LISTEN_CONNECT_TIMEOUT = 10.0
_RELISTEN_ERRORS: tuple[type[BaseException], ...] = (StoreError, *_DRIVER_ERRORS)


def _reply_payloads(replies: Sequence[tuple[str, str]]) -> list[str]:
    """Pack ``(actor_id, message_id)`` pairs into JSON-array payloads under the NOTIFY limit.

    Each element is ``[actor_id, message_id]``, or ``[actor_id]`` when the pair alone would be
    too large (the listener then checks every ask waiting on that actor)."""
    payloads: list[str] = []
    items: list[str] = []
    size = 2  # the brackets
    for actor_id, message_id in dict.fromkeys(replies):
        item = json.dumps([actor_id, message_id], ensure_ascii=False, separators=(",", ":"))
        n = len(item.encode())
        if n + 2 > _MAX_PAYLOAD_BYTES:
            item = json.dumps([actor_id], ensure_ascii=False, separators=(",", ":"))
            n = len(item.encode())
        if items and size + 1 + n > _MAX_PAYLOAD_BYTES:
            payloads.append("[" + ",".join(items) + "]")
            items, size = [], 2
        items.append(item)
        size += n + (1 if len(items) > 1 else 0)
    if items:
        payloads.append("[" + ",".join(items) + "]")
    return payloads


def _parse_reply_payload(payload: str) -> list[tuple[str, str | None]]:
    """The pairs of a reply payload; an unreadable one (another version) wakes nobody."""
    try:
        items = json.loads(payload)
    except ValueError:
        return []
    out: list[tuple[str, str | None]] = []
    if not isinstance(items, list):
        return out
    for item in items:
        if isinstance(item, list) and item and isinstance(item[0], str):
            mid = item[1] if len(item) > 1 and isinstance(item[1], str) else None
            out.append((item[0], mid))
    return out


class _Listener:
    """The store's one LISTEN connection, shared by every channel (outside the pool).

    A supervisor task (asyncio: asyncpg runs on asyncio only) reconnects after the connection
    drops, with back-off, LISTENs on every channel again, and then calls each callback with
    ``None``: notifications sent while it was down are lost, and callers must look for
    themselves. An idle connection is probed every ``_LISTEN_CHECK_EVERY`` seconds, so that a
    peer gone without closing the socket is noticed too."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._callbacks: dict[str, list[Callable[[str | None], None]]] = {}
        self._conn: Any = None
        self._lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: times the connection was re-established (tests, operators)
        self.reconnects = 0

    def idle(self) -> bool:
        return not self._callbacks

    @property
    def server_pid(self) -> int | None:
        """The backend pid of the listening connection (None while reconnecting)."""
        conn = self._conn
        return None if conn is None or conn.is_closed() else int(conn.get_server_pid())

    async def add(self, channel: str, on_payload: Callable[[str | None], None]) -> None:
        if self._task is None and self._conn is None:
            self._attach(await self._store._listen_connect())  # the first failure is raised
        new = channel not in self._callbacks
        self._callbacks.setdefault(channel, []).append(on_payload)
        conn = self._conn
        if new and conn is not None:  # None: reconnecting, which listens on every channel
            try:
                await conn.add_listener(channel, self._dispatch)
            except _DRIVER_ERRORS:
                self._lost.set()  # the supervisor reconnects and listens on every channel
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._supervise(), name="actorlog:listen"
            )

    async def remove(self, channel: str, on_payload: Callable[[str | None], None]) -> None:
        callbacks = self._callbacks.get(channel, [])
        if on_payload in callbacks:
            callbacks.remove(on_payload)
        if callbacks:
            return
        self._callbacks.pop(channel, None)
        conn = self._conn
        if self._callbacks:
            if conn is not None and not conn.is_closed():
                with anyio.move_on_after(5, shield=True), contextlib.suppress(*_DRIVER_ERRORS):
                    await conn.remove_listener(channel, self._dispatch)
            return
        await self.close()

    async def close(self) -> None:
        """Stop the supervisor and close the connection (bounded)."""
        self._callbacks.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
                await task
        conn, self._conn = self._conn, None
        if conn is not None:
            await _close_quietly(conn)

    def _attach(self, conn: Any) -> None:
        self._conn = conn
        self._lost = asyncio.Event()
        lost = self._lost
        conn.add_termination_listener(lambda _conn: lost.set())

    def _dispatch(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        for cb in list(self._callbacks.get(channel, ())):
            try:
                cb(payload)
            except Exception:  # a callback's bug must not stop the listener
                pass

    async def _supervise(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._lost.wait(), _LISTEN_CHECK_EVERY)
            except TimeoutError:
                conn = self._conn
                try:
                    await conn.execute("SELECT 1", timeout=_LISTEN_CONNECT_TIMEOUT)
                    continue
                except _DRIVER_ERRORS:
                    pass  # dead: reconnect
            old, self._conn = self._conn, None
            if old is not None:
                old.terminate()
            delay = _RELISTEN_FIRST
            while True:
                new: Any = None
                try:
                    new = await self._store._listen_connect()
                    for channel in list(self._callbacks):
                        await new.add_listener(channel, self._dispatch)
                    break
                except _RELISTEN_ERRORS:
                    if new is not None:
                        new.terminate()
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _RELISTEN_MAX)
            self._attach(new)
            self.reconnects += 1
            for callbacks in list(self._callbacks.values()):
                for cb in list(callbacks):
                    try:
                        cb(None)  # notifications sent while down are lost: look now
                    except Exception:
                        pass


async def _close_quietly(conn: Any) -> None:
    with anyio.move_on_after(5, shield=True):
        try:
            await conn.close()
            return
        except _DRIVER_ERRORS:
            pass
    conn.terminate()
