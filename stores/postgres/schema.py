"""The PostgreSQL schema of a store and its migrations (docs/FORMAT.md section 6a).

Schema versions are counted apart from the log format (``actorlog_meta.schema_version``).
The schema is created or migrated in one transaction holding an advisory lock, so that
processes opening a new database at once do not race.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from actorlog.store import (
    FORMAT_VERSION,
    ConfigurationError,
    StoreCorruptError,
    StoreUnavailableError,
    UnsupportedFormatError,
)

__all__ = [
    "FENCE_WHERE",
    "MAX_IDENTIFIER_BYTES",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "check_read_only",
    "migrate",
    "quote_ident",
    "schema_from_url",
]

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

# Version 4: where a compacted log starts (FORMAT.md [F16]); CompactionMethods writes it.
_SCHEMA_V4 = """
CREATE TABLE IF NOT EXISTS log_starts (
    actor_id  TEXT PRIMARY KEY,
    first_seq BIGINT NOT NULL,
    checksum  BIGINT NOT NULL,
    at        DOUBLE PRECISION NOT NULL
);
"""

# Version 6: the timer index (send_later, schedules; actorlog.store.TimerStore).
_SCHEMA_V6 = """
CREATE TABLE IF NOT EXISTS timers (
    timer_id   TEXT PRIMARY KEY,
    actor_id   TEXT NOT NULL,
    actor_type TEXT NOT NULL,
    due        DOUBLE PRECISION NOT NULL,
    message_id TEXT NOT NULL,
    type_tag   TEXT NOT NULL,
    body       TEXT NOT NULL,
    sender     TEXT,
    recurrence TEXT,
    state      TEXT NOT NULL DEFAULT 'pending',
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS timers_due ON timers (due) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS timers_actor ON timers (actor_id, due);
-- a deleted actor's pending timers are cancelled with it (store_audit, version 5)
CREATE OR REPLACE FUNCTION actorlog_store_audit_timers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.timers SET state = 'cancelled'
    WHERE actor_id = NEW.actor_id AND state = 'pending';
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS store_audit_timers ON store_audit;
CREATE TRIGGER store_audit_timers AFTER INSERT ON store_audit
    FOR EACH ROW WHEN (NEW.kind = 'deleted') EXECUTE FUNCTION actorlog_store_audit_timers();
"""

# Version 7: claimed timers (state 'firing', claim_timer) are read through their own index.
_SCHEMA_V7 = """
CREATE INDEX IF NOT EXISTS timers_firing ON timers (due) WHERE state = 'firing';
"""

# Version 8: deleting an actor cancels its claimed ('firing') timers too, not only its pending
# ones (a firing row left by a crash would be delivered again after a restart).
_SCHEMA_V8 = """
CREATE OR REPLACE FUNCTION actorlog_store_audit_timers() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.timers SET state = 'cancelled'
    WHERE actor_id = NEW.actor_id AND state IN ('pending', 'firing');
    RETURN NEW;
END
$$;
"""

#: Schema migrations: ``MIGRATIONS[v]`` takes a store from schema version ``v - 1`` to
#: ``v``. They run in the schema they create tables in; ``{actors}`` and ``{leases}`` stand
#: for its tables. Version 1 is log format 1; version 2 adds leases, fencing and the inbox;
#: version 3 narrows the ref index to step rows; version 4 adds log starts (compaction);
#: version 5 the store audit table (deleting actors); version 6 the timer index; version 7
#: the index of claimed (``firing``) timers; version 8 cancels a deleted actor's claimed
#: timers too.
# Deleting actors (``delete_actor``): a store-level audit table; inserting a ``deleted``
# row removes the actor's rows in the same statement (so, in one transaction).
_SCHEMA_V5 = """
CREATE TABLE IF NOT EXISTS store_audit (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       DOUBLE PRECISION NOT NULL,
    kind     TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    detail   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS store_audit_actor ON store_audit (actor_id, id);
CREATE OR REPLACE FUNCTION actorlog_store_audit_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.entries WHERE actor_id = NEW.actor_id;
    DELETE FROM {schema}.snapshots WHERE actor_id = NEW.actor_id;
    DELETE FROM {schema}.events WHERE actor_id = NEW.actor_id;
    DELETE FROM {schema}.inbox WHERE actor_id = NEW.actor_id;
    DELETE FROM {schema}.log_starts WHERE actor_id = NEW.actor_id;
    DELETE FROM {schema}.actors WHERE actor_id = NEW.actor_id;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS store_audit_delete ON store_audit;
CREATE TRIGGER store_audit_delete AFTER INSERT ON store_audit
    FOR EACH ROW WHEN (NEW.kind = 'deleted') EXECUTE FUNCTION actorlog_store_audit_delete();
"""

MIGRATIONS: dict[int, str] = {
    1: _SCHEMA_V1,
    2: _SCHEMA_V2,
    3: _SCHEMA_V3,
    4: _SCHEMA_V4,
    5: _SCHEMA_V5,
    6: _SCHEMA_V6,
    7: _SCHEMA_V7,
    8: _SCHEMA_V8,
}
SCHEMA_VERSION = max(MIGRATIONS)

#: The WHERE clause of a fenced ``INSERT ... SELECT``: true if the statement's fencing
#: token (parameter ``$n``; NULL: unfenced) is the actor's current one (``$1``), with the
#: lease row share-locked so that a take-over waits for the statement; none otherwise.
FENCE_WHERE = (
    "WHERE (${n}::bigint IS NULL OR EXISTS (SELECT 1 FROM leases "
    "WHERE actor_id = $1 AND token = ${n} FOR SHARE))"
)

#: Advisory lock held (for the transaction) while the schema is created or migrated.
_SCHEMA_LOCK_KEY = int.from_bytes(b"actorlog", "big")


def quote_ident(name: str) -> str:
    """An SQL identifier; always quoted, so that keywords and mixed case work too."""
    return '"' + name.replace('"', '""') + '"'


#: PostgreSQL truncates identifiers to 63 bytes (NAMEDATALEN - 1): two longer schema names
#: with the same first 63 bytes would silently share one store.
MAX_IDENTIFIER_BYTES = 63


def schema_from_url(dsn: str, schema: str | None) -> tuple[str, str | None]:
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


async def migrate(conn: Any, schema: str | None, url: str) -> None:
    """Create or migrate the store's tables on ``conn`` (one transaction, under the advisory
    lock); with ``schema``, create that PostgreSQL schema first. ``url`` (redacted) names the
    store in errors.

    Raises:
        UnsupportedFormatError: the database holds a newer format or schema; nothing changed.
        StoreUnavailableError: no schema of the search_path exists to create the tables in.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK_KEY)
        if schema is not None:
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        found = await _format_version(conn, url) or 0
        if found > FORMAT_VERSION:
            raise UnsupportedFormatError(found, FORMAT_VERSION)
        have = await _schema_version(conn, url) if found else 0
        if have > SCHEMA_VERSION:
            raise UnsupportedFormatError(have, SCHEMA_VERSION)
        if found == FORMAT_VERSION and have == SCHEMA_VERSION:
            return
        current = await conn.fetchval("SELECT current_schema()")
        if current is None:
            raise StoreUnavailableError(
                f"cannot create actorlog's tables in {url}: no schema of the "
                "search_path exists (pass schema=... to have one created)"
            )
        actors = f"{quote_ident(current)}.actors"
        leases = f"{quote_ident(current)}.leases"
        for version in range(have + 1, SCHEMA_VERSION + 1):
            sql = MIGRATIONS[version].replace("{actors}", actors)
            sql = sql.replace("{schema}", quote_ident(current))
            await conn.execute(sql.replace("{leases}", leases))
        await conn.execute(
            "INSERT INTO actorlog_meta (key, value) VALUES ('format_version', $1), "
            "('schema_version', $2) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            str(FORMAT_VERSION),
            str(SCHEMA_VERSION),
        )


async def check_read_only(conn: Any, url: str) -> None:
    """Check that ``conn`` sees a store this code can read, without changing anything.

    Raises:
        StoreUnavailableError: there is no actorlog store.
        UnsupportedFormatError: the store has a newer format.
    """
    found = await _format_version(conn, url)
    if found is None:
        raise StoreUnavailableError(f"no actorlog store in {url}")
    if found > FORMAT_VERSION:
        raise UnsupportedFormatError(found, FORMAT_VERSION)


async def _format_version(conn: Any, url: str) -> int | None:
    """The stored format version, or None if there is no actorlog schema yet."""
    if await conn.fetchval("SELECT to_regclass('actorlog_meta')") is None:
        return None
    value = await conn.fetchval("SELECT value FROM actorlog_meta WHERE key = 'format_version'")
    return None if value is None else _version(value, "format_version", url)


async def _schema_version(conn: Any, url: str) -> int:
    """The schema migration version (1 for stores written before it was recorded)."""
    value = await conn.fetchval("SELECT value FROM actorlog_meta WHERE key = 'schema_version'")
    return 1 if value is None else _version(value, "schema_version", url)


def _version(value: object, key: str, url: str) -> int:
    """A version number read from ``actorlog_meta``; anything else is damage, named."""
    try:
        return int(str(value))
    except ValueError:
        raise StoreCorruptError(url, f"actorlog_meta.{key} holds {value!r}, not a number") from None
