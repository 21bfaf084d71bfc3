"""The SQLite schema of a store (docs/FORMAT.md section 6): created, or completed, on every
open for writing, in one ``BEGIN IMMEDIATE`` transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorlog.store import (
    ACTOR_COLUMNS,
    FORMAT_VERSION,
    StoreCorruptError,
    UnsupportedFormatError,
)

from ._sqlite_schema3 import DELETE_LOG3, DELETE_LOG5, ENTRIES3, ENTRIES5

if TYPE_CHECKING:
    from ._sqlite_conn import Connection

__all__ = [
    "PRELUDE",
    "SCHEMA",
    "SCHEMA3",
    "SCHEMA5",
    "UNFINISHED",
    "check_version",
    "file_layout",
]

#: Run before the schema: takes effect only in a new, empty file (before its first table);
#: an existing file keeps its mode (docs/tuning.md, "Reclaiming space").
PRELUDE = "PRAGMA auto_vacuum=INCREMENTAL"

#: The actors with unfinished work, and the summary rows with a column of the wrong type
#: (SQLite's columns are not typed: ``actor_row`` names the damage).
UNFINISHED = f"""SELECT {", ".join(ACTOR_COLUMNS)} FROM actors
WHERE handled_seq < last_message_seq
   OR typeof(actor_id) != 'text' OR typeof(actor_type) != 'text'
   OR typeof(last_seq) != 'integer' OR typeof(last_message_seq) != 'integer'
   OR typeof(handled_seq) != 'integer' OR typeof(first_seq) != 'integer'
   OR typeof(created_at) NOT IN ('real', 'integer')
ORDER BY actor_id"""

_META = """
CREATE TABLE IF NOT EXISTS actorlog_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

#: Formats 1 and 2: the log in ``entries``, with text columns.
_ENTRIES2 = """
CREATE TABLE IF NOT EXISTS actors (
    actor_id         TEXT PRIMARY KEY,
    actor_type       TEXT NOT NULL,
    created_at       REAL NOT NULL,
    last_seq         INTEGER NOT NULL DEFAULT 0,
    last_message_seq INTEGER NOT NULL DEFAULT 0,
    handled_seq      INTEGER NOT NULL DEFAULT 0,
    first_seq        INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS entries (
    actor_id   TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    type_tag   TEXT    NOT NULL,
    ref        INTEGER NOT NULL,
    message_id TEXT,
    payload    BLOB    NOT NULL,
    checksum   INTEGER NOT NULL,
    PRIMARY KEY (actor_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS entries_message_id
    ON entries (actor_id, message_id) WHERE message_id IS NOT NULL;
DROP INDEX IF EXISTS entries_ref;
CREATE INDEX IF NOT EXISTS entries_step ON entries (actor_id, ref) WHERE kind = 'step';
CREATE TRIGGER IF NOT EXISTS entries_contiguous BEFORE INSERT ON entries BEGIN
    SELECT RAISE(ABORT, 'actorlog: seq conflict')
    WHERE NEW.seq != coalesce(
        (SELECT last_seq FROM actors WHERE actor_id = NEW.actor_id), -1) + 1;
END;
CREATE TRIGGER IF NOT EXISTS entries_summary AFTER INSERT ON entries BEGIN
    UPDATE actors SET
        last_seq = NEW.seq,
        first_seq = CASE WHEN first_seq = 0 THEN NEW.seq ELSE first_seq END,
        last_message_seq = CASE WHEN NEW.kind = 'message' THEN NEW.seq
                                ELSE last_message_seq END,
        handled_seq = CASE WHEN NEW.kind = 'step' AND NEW.ref > handled_seq THEN NEW.ref
                           ELSE handled_seq END
    WHERE actor_id = NEW.actor_id;
END;
CREATE TABLE IF NOT EXISTS log_starts (
    actor_id  TEXT PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    checksum  INTEGER NOT NULL,
    at        REAL    NOT NULL
);
CREATE TRIGGER IF NOT EXISTS log_starts_check BEFORE INSERT ON log_starts BEGIN
    SELECT RAISE(ABORT, 'actorlog: compaction must keep the last entry')
    WHERE NEW.first_seq > coalesce(
        (SELECT last_seq FROM actors WHERE actor_id = NEW.actor_id), 0);
END;
CREATE TRIGGER IF NOT EXISTS log_starts_compact AFTER INSERT ON log_starts BEGIN
    DELETE FROM entries WHERE actor_id = NEW.actor_id AND seq < NEW.first_seq;
    UPDATE actors SET first_seq = NEW.first_seq WHERE actor_id = NEW.actor_id;
END;
"""

#: The same in every format.
_COMMON = """
CREATE TABLE IF NOT EXISTS snapshots (
    actor_id       TEXT    NOT NULL,
    seq            INTEGER NOT NULL,
    handled_seq    INTEGER NOT NULL,
    type_tag       TEXT    NOT NULL,
    schema_version INTEGER NOT NULL,
    digest         BLOB    NOT NULL,
    size           INTEGER NOT NULL,
    created_at     REAL    NOT NULL,
    data           BLOB    NOT NULL,
    PRIMARY KEY (actor_id, seq)
);
CREATE TABLE IF NOT EXISTS events (
    id       INTEGER PRIMARY KEY,
    actor_id TEXT NOT NULL,
    at       REAL NOT NULL,
    kind     TEXT NOT NULL,
    detail   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_actor ON events (actor_id, id);
CREATE TABLE IF NOT EXISTS timers (
    timer_id   TEXT PRIMARY KEY,
    actor_id   TEXT NOT NULL,
    actor_type TEXT NOT NULL,
    due        REAL NOT NULL,
    message_id TEXT NOT NULL,
    type_tag   TEXT NOT NULL,
    body       TEXT NOT NULL,
    sender     TEXT,
    recurrence TEXT,
    state      TEXT NOT NULL DEFAULT 'pending',
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS timers_due ON timers (due) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS timers_firing ON timers (due) WHERE state = 'firing';
CREATE INDEX IF NOT EXISTS timers_actor ON timers (actor_id, due);
CREATE TABLE IF NOT EXISTS store_audit (
    id       INTEGER PRIMARY KEY,
    at       REAL NOT NULL,
    kind     TEXT NOT NULL,
    actor_id TEXT NOT NULL,
    detail   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS store_audit_actor ON store_audit (actor_id, id);
"""

#: Deleting an actor deletes its log rows (``delete_log``), and the rest of its rows.
_AUDIT = """
CREATE TRIGGER IF NOT EXISTS store_audit_delete AFTER INSERT ON store_audit
WHEN NEW.kind = 'deleted' BEGIN
    {delete_log}
    DELETE FROM snapshots WHERE actor_id = NEW.actor_id;
    DELETE FROM events WHERE actor_id = NEW.actor_id;
    DELETE FROM log_starts WHERE actor_id = NEW.actor_id;
    DELETE FROM actors WHERE actor_id = NEW.actor_id;
END;
CREATE TRIGGER IF NOT EXISTS store_audit_timers AFTER INSERT ON store_audit
WHEN NEW.kind = 'deleted' BEGIN
    UPDATE timers SET state = 'cancelled' WHERE actor_id = NEW.actor_id AND state = 'pending';
END;
-- and its claimed ones (a crash during their delivery left them 'firing'): a trigger of its
-- own, so a file written before it gains it on open (CREATE ... IF NOT EXISTS)
CREATE TRIGGER IF NOT EXISTS store_audit_timers_firing AFTER INSERT ON store_audit
WHEN NEW.kind = 'deleted' BEGIN
    UPDATE timers SET state = 'cancelled' WHERE actor_id = NEW.actor_id AND state = 'firing';
END;
"""

#: The schema of a file written in format 2 (or 1): created or completed on open.
SCHEMA = (
    _META
    + _ENTRIES2
    + _COMMON
    + _AUDIT.replace("{delete_log}", "DELETE FROM entries WHERE actor_id = NEW.actor_id;")
)

#: The schema of a file written in format 3 or 4 (``_sqlite_schema3``).
SCHEMA3 = _META + ENTRIES3 + _COMMON + _AUDIT.replace("{delete_log}", DELETE_LOG3)

#: The schema of a file made in format 5 (``_sqlite_schema3``; the meta table ``WITHOUT
#: ROWID``: no second b-tree for its key).
SCHEMA5 = (
    _META.replace(");", ") WITHOUT ROWID;")
    + ENTRIES5
    + _COMMON
    + _AUDIT.replace("{delete_log}", DELETE_LOG5)
)


async def check_version(conn: Connection, path: str) -> int | None:
    """The format version of the file (None if it holds no actorlog tables, 1 if it records
    none); raises ``UnsupportedFormatError`` for a newer format and ``StoreCorruptError``
    for a damaged header or version (before anything is written to the file)."""
    rows = await conn.execute_fetchall(
        "SELECT name FROM sqlite_master WHERE type='table' AND name='actorlog_meta'"
    )
    if not list(rows):
        return None
    # actorlog writes UTF-8 files; a flipped header byte makes SQLite read every text
    # as UTF-16, and no key would match any more (a store that looks empty)
    ((encoding,),) = await conn.execute_fetchall("PRAGMA encoding")
    if encoding != "UTF-8":
        raise StoreCorruptError(
            path, f"the file header says text encoding {encoding}, actorlog writes UTF-8"
        )
    rows = await conn.execute_fetchall("SELECT value FROM actorlog_meta WHERE key='format_version'")
    version = 1
    for (value,) in rows:
        if type(value) is not str or not value.isdigit():
            raise StoreCorruptError(
                path, f"actorlog_meta.format_version holds {value!r}, not a number"
            )
        if int(value) > FORMAT_VERSION:
            raise UnsupportedFormatError(int(value), FORMAT_VERSION)
        version = int(value)
    return version


async def file_layout(conn: Connection, version: int | None) -> int:
    """The layout of the log in the file (FORMAT.md section 6): ``FORMAT_VERSION`` (5) for a
    new file (``version`` None) or one made in format 5 (``log`` a rowid table, whatever
    ``format_version`` says), 4 for a file made in format 4 (format 3's tables, packed
    payloads [F21]), 3 for a file made in format 3 (the same tables, the version says
    which), 2 for the text layout of formats 1 and 2 (a table ``entries``): an older file
    keeps its layout, and is written in its format (2 for a file of format 1)."""
    if version is None:
        return FORMAT_VERSION
    rows = await conn.execute_fetchall(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN ('entries', 'log')"
    )
    tables = {name: sql for name, sql in rows}
    if "entries" in tables:
        return 2
    if "WITHOUT ROWID" not in str(tables.get("log", "WITHOUT ROWID")).upper():
        return 5  # the rowid table of format 5, whatever the version says
    return 4 if version >= 4 else 3
