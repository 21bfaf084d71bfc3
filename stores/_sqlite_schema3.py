"""The SQLite layout of format 3 (docs/FORMAT.md section 6, "Format 3"): the rows of the log
in ``log``, keyed by a small integer per actor (``actors.id``), with the kind and the type
tag as small integer codes (``tags``) and the checksum as a signed 32-bit integer; and a view
``entries`` that shows them with format 2's columns (actor id, kind and tag as text, the
checksum unsigned), through which the store reads and writes, like SQL typed by hand.

The view type-checks the coded columns itself (FORMAT.md [F15]): a code of another storage
class, or one without a meaning, reads as NULL, which the row check names as damage
(``column type``). Every other column reaches the row
check unchanged. The checksum frame ([F6]) is computed from the view's values: a flipped
bit in a code, in a tag's text or in an actor's key changes the entry's frame (or moves the
row out of its actor's log: a broken seq chain), so it is caught like damage to any column.
In a format-4 file the view's ``payload`` unpacks a packed one ([F21], :data:`PAYLOAD4`).
"""

from __future__ import annotations

__all__ = [
    "BY_PK_MESSAGE_ID",
    "BY_PK_MESSAGE_ID5",
    "DELETE_LOG3",
    "DELETE_LOG5",
    "ENTRIES3",
    "ENTRIES5",
    "KEPT5",
    "KIND_CODES",
    "LAST_SEQ5",
    "LOG5_COLS",
    "LOG_COLS",
    "MAX_ACTOR_KEY",
    "MAX_KEY",
    "MAX_SEQ",
    "MESSAGE5",
    "MESSAGE_IDS",
    "MESSAGE_IDS5",
    "REF5",
    "STEP_OF",
    "UNPACK_KEPT5",
    "anchors5",
    "read5",
    "step_of",
]

#: kind name -> code, as in the checksum frame (FORMAT.md [F4])
_KINDS = ("message", "intent", "result", "step", "effect", "decision")
#: the same as a mapping (what the view's insert trigger stores for a kind's name)
KIND_CODES = {k: i for i, k in enumerate(_KINDS, start=1)}
#: the columns of ``log``, in the order of the view's (``ENTRY_COLS``)
LOG_COLS = "actor, seq, kind, tag, ref, message_id, payload, checksum"

_KIND_NAME = (
    "CASE WHEN typeof(l.kind) = 'integer' THEN CASE l.kind "
    + " ".join(f"WHEN {i} THEN '{k}'" for i, k in enumerate(_KINDS, start=1))
    + " END END"
)


def _kind_code(value: str) -> str:
    """SQL: the code of the kind name ``value`` (anything else stays as it is: a text in an
    integer column, which a reader names as damage)."""
    whens = " ".join(f"WHEN '{k}' THEN {i}" for i, k in enumerate(_KINDS, start=1))
    return f"CASE {value} {whens} ELSE {value} END"


def _signed(value: str) -> str:
    """SQL: an unsigned 32-bit checksum as the signed integer stored (4 bytes in a record)."""
    return (
        f"CASE WHEN typeof({value}) = 'integer' AND {value} BETWEEN 2147483648 AND 4294967295 "
        f"THEN {value} - 4294967296 ELSE {value} END"
    )


# Format 4's unpacking in SQL (docs/FORMAT.md [F21]): the ``payload`` column of the view
# ``entries``, so that every reader of a format-4 file through the view (the store, an
# operator's SQL typed by hand, a checker reading rows beside the store's code) gets the
# payload the checksum covers, as ``_sqlite_pack.unpack`` makes it.
#
# SQLite's JSON functions keep the text of every token they do not replace (a number's
# spelling, a string's escapes), so replacing an item of a compact array gives the array's
# bytes with that item's text changed, as Python's encoder writes it (and as ``unpack``
# gives it: tests/stores/test_sqlite_format4.py reads both for the same rows). Every check
# of ``unpack`` is made here too (a flag's item is the integer ``0``, an anchor is stored
# unpacked and holds what it must);
# when one fails the expression is NULL and the view shows the stored bytes, which no
# checksum matches. An unpacked row's payload is shown as it is, without any JSON function.

#: the stored payload's JSON after its flag byte, as text
_BODY = "CAST(substr(l.payload, 2) AS TEXT)"
#: the flag byte
_FLAGS = "unicode(CAST(substr(l.payload, 1, 1) AS TEXT))"
#: the position of ``at`` by kind code (message 1, intent 2, result 3, step 4, effect 5)
_AT_OF_CODE = (
    "CASE {code} WHEN 1 THEN 1 WHEN 2 THEN 5 WHEN 3 THEN 2 WHEN 4 THEN 2 WHEN 5 THEN 2 END"
)


def _stored_json(alias: str) -> str:
    """SQL: the payload of log row ``alias`` as JSON text if it is an unpacked JSON array
    (else NULL)."""
    return (
        f"CASE WHEN typeof({alias}.payload) = 'blob' AND substr({alias}.payload, 1, 1) = x'5b' "
        f"AND json_valid(CAST({alias}.payload AS TEXT)) THEN CAST({alias}.payload AS TEXT) END"
    )


def _row(seq: str) -> str:
    return f"(SELECT {{col}} FROM log AS a WHERE a.actor = l.actor AND a.seq = {seq})"


_PREV = _row("l.seq - 1")
_REF = _row("l.ref")


def _unpack() -> str:
    """SQL: the unpacked payload of a packed row ``l`` (NULL when it does not unpack)."""
    prev_json = _PREV.format(col=_stored_json("a"))
    prev_code = _PREV.format(col="a.kind")
    ref_json = _REF.format(col=f"CASE WHEN a.kind = 1 THEN {_stored_json('a')} END")
    at_pos = "CASE l.kind WHEN 2 THEN 5 WHEN 3 THEN 2 WHEN 4 THEN 2 WHEN 5 THEN 2 END"
    # each step's JSON text, or NULL when a check fails
    body = f"CASE WHEN json_valid({_BODY}) AND json_type({_BODY}) = 'array' THEN {_BODY} END"
    prev_at = (
        f"(SELECT CASE WHEN json_type(p.j, '$[' || p.i || ']') = 'integer' "
        f"THEN json_extract(p.j, '$[' || p.i || ']') END "
        f"FROM (SELECT {prev_json} AS j, {_AT_OF_CODE.format(code=prev_code)} AS i) AS p)"
    )
    j1 = (
        f"(SELECT CASE WHEN NOT f & 1 THEN b "
        f"WHEN json_type(b, '$[' || i || ']') = 'integer' AND {prev_at} IS NOT NULL "
        f"THEN json_replace(b, '$[' || i || ']', {prev_at} + json_extract(b, '$[' || i || ']')) "
        f"END FROM (SELECT {body} AS b, {at_pos} AS i, {_FLAGS} AS f))"
    )
    key = (
        "(SELECT CASE WHEN json_type(m.j, '$[2]') = 'text' AND json_type(x.b, '$[0]') = 'integer' "
        "AND (json_array_length(x.b) < 8 OR json_type(x.b, '$[7]') = 'text') "
        "THEN ea.actor_id || ':' || json_extract(m.j, '$[2]') || ':' || l.ref || ':' || "
        "CASE WHEN json_array_length(x.b) > 7 AND json_extract(x.b, '$[7]') != '' "
        "THEN json_extract(x.b, '$[7]') || '.' ELSE '' END || json_extract(x.b, '$[0]') END "
        f"FROM (SELECT {ref_json} AS j) AS m, actors AS ea WHERE ea.id = l.actor)"
    )
    j2 = (
        f"(SELECT CASE WHEN NOT {_FLAGS} & 2 THEN x.b "
        "WHEN l.kind = 2 AND json_type(x.b, '$[4]') = 'integer' AND json_extract(x.b, '$[4]') = 0 "
        f"AND {key} IS NOT NULL THEN json_replace(x.b, '$[4]', {key}) END "
        f"FROM (SELECT {j1} AS b) AS x)"
    )
    j3 = (
        f"(SELECT CASE WHEN NOT {_FLAGS} & 4 THEN y.b "
        "WHEN l.kind = 4 AND json_type(y.b, '$[0]') = 'true' "
        "AND json_type(y.b, '$[1]') = 'integer' AND json_extract(y.b, '$[1]') = 0 "
        f"AND {prev_code} = 3 AND json_type(r.j, '$[0]') = 'true' "
        "AND json_array_length(r.j) > 1 "
        "THEN json_replace(y.b, '$[1]', json(r.j -> '$[1]')) END "
        f"FROM (SELECT {j2} AS b) AS y, (SELECT {prev_json} AS j) AS r)"
    )
    return f"CAST({j3} AS BLOB)"


#: SQL: the view's ``payload`` of log row ``l``: unpacked when it is packed and unpacks
PAYLOAD4 = (
    "CASE WHEN typeof(l.payload) = 'blob' AND substr(l.payload, 1, 1) BETWEEN x'01' AND x'07' "
    "AND l.kind BETWEEN 2 AND 5 "
    f"THEN coalesce({_unpack()}, l.payload) ELSE l.payload END"
)


_ACTOR_KEY = "(SELECT id FROM actors WHERE actor_id = {})"
_TAG_KEY = "(SELECT id FROM tags WHERE tag = {})"

#: The actors and their keys, the type tags and theirs: the same tables in formats 3 to 5.
_ACTORS_TAGS = """
CREATE TABLE IF NOT EXISTS actors (
    id               INTEGER PRIMARY KEY,
    actor_id         TEXT NOT NULL UNIQUE,
    actor_type       TEXT NOT NULL,
    created_at       REAL NOT NULL,
    last_seq         INTEGER NOT NULL DEFAULT 0,
    last_message_seq INTEGER NOT NULL DEFAULT 0,
    handled_seq      INTEGER NOT NULL DEFAULT 0,
    first_seq        INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS tags (
    id  INTEGER PRIMARY KEY,
    tag TEXT NOT NULL UNIQUE
);
"""

#: Format 3's tables, indexes, view and triggers of the log (the rest of the schema is the
#: same in every format: ``_sqlite_schema``).
ENTRIES3 = f"""{_ACTORS_TAGS}CREATE TABLE IF NOT EXISTS log (
    actor      INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    kind       INTEGER NOT NULL,
    tag        INTEGER NOT NULL,
    ref        INTEGER NOT NULL,
    message_id TEXT,
    payload    BLOB    NOT NULL,
    checksum   INTEGER NOT NULL,
    PRIMARY KEY (actor, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS log_message_id
    ON log (actor, message_id) WHERE message_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS log_step ON log (actor, ref) WHERE kind = 4;
CREATE VIEW IF NOT EXISTS entries (
    actor_id, seq, kind, type_tag, ref, message_id, payload, checksum
) AS SELECT a.actor_id, l.seq, {_KIND_NAME},
    CASE WHEN typeof(l.tag) = 'integer' THEN t.tag END, l.ref, l.message_id, {PAYLOAD4},
    CASE WHEN typeof(l.checksum) = 'integer'
          AND l.checksum BETWEEN -2147483648 AND 2147483647
         THEN l.checksum & 4294967295 END
FROM log AS l JOIN actors AS a ON a.id = l.actor LEFT JOIN tags AS t ON t.id = l.tag;
CREATE VIEW IF NOT EXISTS log_rows (
    actor_id, seq, kind, type_tag, ref, message_id, payload, checksum
) AS SELECT a.actor_id, l.seq, {_KIND_NAME},
    CASE WHEN typeof(l.tag) = 'integer' THEN t.tag END, l.ref, l.message_id, l.payload,
    CASE WHEN typeof(l.checksum) = 'integer'
          AND l.checksum BETWEEN -2147483648 AND 2147483647
         THEN l.checksum & 4294967295 END
FROM log AS l JOIN actors AS a ON a.id = l.actor LEFT JOIN tags AS t ON t.id = l.tag;
CREATE TRIGGER IF NOT EXISTS log_contiguous BEFORE INSERT ON log BEGIN
    SELECT RAISE(ABORT, 'actorlog: seq conflict')
    WHERE NEW.seq != coalesce((SELECT last_seq FROM actors WHERE id = NEW.actor), -1) + 1;
END;
CREATE TRIGGER IF NOT EXISTS log_summary AFTER INSERT ON log BEGIN
    UPDATE actors SET
        last_seq = NEW.seq,
        first_seq = CASE WHEN first_seq = 0 THEN NEW.seq ELSE first_seq END,
        last_message_seq = CASE WHEN NEW.kind = 1 THEN NEW.seq ELSE last_message_seq END,
        handled_seq = CASE WHEN NEW.kind = 4 AND NEW.ref > handled_seq THEN NEW.ref
                           ELSE handled_seq END
    WHERE id = NEW.actor;
END;
CREATE TRIGGER IF NOT EXISTS entries_insert INSTEAD OF INSERT ON entries BEGIN
    INSERT OR IGNORE INTO tags (tag) VALUES (NEW.type_tag);
    INSERT INTO log ({LOG_COLS}) VALUES (
        {_ACTOR_KEY.format("NEW.actor_id")}, NEW.seq, {_kind_code("NEW.kind")},
        {_TAG_KEY.format("NEW.type_tag")}, NEW.ref, NEW.message_id, NEW.payload,
        {_signed("NEW.checksum")});
END;
CREATE TRIGGER IF NOT EXISTS entries_update INSTEAD OF UPDATE ON entries BEGIN
    INSERT OR IGNORE INTO tags (tag) VALUES (NEW.type_tag);
    UPDATE log SET actor = {_ACTOR_KEY.format("NEW.actor_id")}, seq = NEW.seq,
        kind = {_kind_code("NEW.kind")}, tag = {_TAG_KEY.format("NEW.type_tag")},
        ref = NEW.ref, message_id = NEW.message_id, payload = NEW.payload,
        checksum = {_signed("NEW.checksum")}
    WHERE actor = {_ACTOR_KEY.format("OLD.actor_id")} AND seq = OLD.seq;
END;
CREATE TRIGGER IF NOT EXISTS entries_delete INSTEAD OF DELETE ON entries BEGIN
    DELETE FROM log WHERE actor = {_ACTOR_KEY.format("OLD.actor_id")} AND seq = OLD.seq;
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
    DELETE FROM log WHERE actor = {_ACTOR_KEY.format("NEW.actor_id")}
        AND seq < NEW.first_seq;
    UPDATE actors SET first_seq = NEW.first_seq WHERE actor_id = NEW.actor_id;
END;
"""

#: The audit trigger's deletion of an actor's log rows (before its ``actors`` row goes).
DELETE_LOG3 = f"DELETE FROM log WHERE actor = {_ACTOR_KEY.format('NEW.actor_id')};"

#: The steps of a message (a repeated ``ask``), through the partial index ``log_step`` (named:
#: the planner would take the primary key, and read the actor's whole log).
STEP_OF = (
    "SELECT e.actor_id, e.seq, e.kind, e.type_tag, e.ref, e.message_id, e.payload, e.checksum "
    "FROM entries AS e WHERE e.seq IN (SELECT seq FROM log INDEXED BY log_step WHERE actor = "
    + _ACTOR_KEY.format("?")
    + " AND kind = 4 AND ref = ?) AND e.actor_id = ?"
)


def step_of(layout: int, indexed: bool) -> str:
    """The step lookup's SQL, taking ``(actor_id, ref, actor_id)``: :data:`STEP_OF` in
    formats 3 and 4; in the text layout the same through ``entries_step`` when the file has that
    index (``indexed``: a file from before it, opened read-only, has ``entries_ref``), which
    is named too, or SQLite's planner reads the actor's whole log (a ``WITHOUT ROWID`` file)."""
    if layout >= 3:
        return STEP_OF
    by = "INDEXED BY entries_step " if indexed else ""
    return (
        "SELECT actor_id, seq, kind, type_tag, ref, message_id, payload, checksum "
        f"FROM entries {by}WHERE actor_id = ? AND kind = 'step' AND ref = ? AND actor_id = ?"
    )


#: The message ids of an actor's log, from the index ``log_message_id`` alone.
MESSAGE_IDS = (
    "SELECT message_id FROM log WHERE actor = "
    + _ACTOR_KEY.format("?")
    + " AND message_id IS NOT NULL LIMIT ?"
)

#: Whether the actor's log holds a message id, read through the primary key (never through
#: the message-id index: ``_sqlite_commit._explains``).
BY_PK_MESSAGE_ID = (
    "SELECT 1 FROM log INDEXED BY sqlite_autoindex_log_1 WHERE actor = "
    + _ACTOR_KEY.format("?")
    + " AND message_id = ? LIMIT 1"
)


# Format 5 (docs/FORMAT.md section 6, "Format 5" [F24]): ``log`` is a rowid table keyed
# ``actor << 32 | seq`` (``id``), so that an actor's appends go to the right edge of its
# range, where SQLite fills a page before it starts the next (a ``WITHOUT ROWID`` table's
# split leaves both halves part empty); no step index; the meta and log-start tables
# ``WITHOUT ROWID``. Payloads are packed as in format 4 ([F21]). An actor's rows are the
# rowid range ``(key << 32) + 1 .. (key << 32) + MAX_SEQ``: every query of the store names
# that range, which SQLite reads as a range of the table's b-tree.

#: the highest seq of a format-5 file, and the highest actor key
MAX_SEQ, MAX_ACTOR_KEY = (1 << 32) - 1, (1 << 31) - 1
#: the highest actor key of a file (NULL: no actor), which a format-5 file bounds
MAX_KEY = "SELECT max(id) FROM actors"
#: the columns of format 5's ``log``, in the order of the view's
LOG5_COLS = "id, kind, tag, ref, message_id, payload, checksum"
_BASE = "(a.id << 32)"  # the rowid before an actor's first entry, for actors row ``a``

#: SQL: the view's ``payload`` in a format-5 file (format 4's, with the rows it unpacks
#: against found by rowid: the entry at ``seq - 1`` and at ``ref``)
PAYLOAD5 = (
    PAYLOAD4.replace("a.actor = l.actor AND a.seq = l.seq - 1", "a.id = l.id - 1")
    .replace("a.actor = l.actor AND a.seq = l.ref", "a.id = ((l.id >> 32) << 32) + l.ref")
    .replace("ea.id = l.actor", "ea.id = l.id >> 32")
)
assert "l.actor" not in PAYLOAD5 and "l.seq" not in PAYLOAD5  # every use translated

_CHECKSUM = (
    "CASE WHEN typeof(l.checksum) = 'integer' "
    "AND l.checksum BETWEEN -2147483648 AND 2147483647 THEN l.checksum & 4294967295 END"
)
#: the columns of ``entries`` from actors row ``a``, log row ``l`` and tags row ``t``, the
#: payload ``{payload}``
_SELECT5 = (
    f"a.actor_id, l.id - {_BASE}, {_KIND_NAME}, "
    "CASE WHEN typeof(l.tag) = 'integer' THEN t.tag END, l.ref, l.message_id, {payload}, "
    + _CHECKSUM
)
#: an actor's rows with ``lo < seq <= hi``
_FROM5 = (
    f"FROM actors AS a JOIN log AS l ON l.id > {_BASE} + {{lo}} AND l.id <= {_BASE} + {{hi}} "
    "LEFT JOIN tags AS t ON t.id = l.tag"
)
_KEY5 = "(" + _ACTOR_KEY.format("{}") + " << 32)"

ENTRIES5 = f"""{_ACTORS_TAGS}CREATE TABLE IF NOT EXISTS log (
    id         INTEGER PRIMARY KEY,
    kind       INTEGER NOT NULL,
    tag        INTEGER NOT NULL,
    ref        INTEGER NOT NULL,
    message_id TEXT,
    payload    BLOB    NOT NULL,
    checksum   INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS log_message_id
    ON log (id >> 32, message_id) WHERE message_id IS NOT NULL;
CREATE VIEW IF NOT EXISTS entries (
    actor_id, seq, kind, type_tag, ref, message_id, payload, checksum
) AS SELECT {_SELECT5.format(payload=PAYLOAD5)} {_FROM5.format(lo=0, hi=MAX_SEQ)};
CREATE TRIGGER IF NOT EXISTS log_contiguous BEFORE INSERT ON log BEGIN
    SELECT RAISE(ABORT, 'actorlog: seq conflict')
    WHERE NEW.id & 4294967295
        != coalesce((SELECT last_seq FROM actors WHERE id = NEW.id >> 32), -1) + 1;
END;
CREATE TRIGGER IF NOT EXISTS log_summary AFTER INSERT ON log BEGIN
    UPDATE actors SET
        last_seq = NEW.id & 4294967295,
        first_seq = CASE WHEN first_seq = 0 THEN NEW.id & 4294967295 ELSE first_seq END,
        last_message_seq = CASE WHEN NEW.kind = 1 THEN NEW.id & 4294967295
                                ELSE last_message_seq END,
        handled_seq = CASE WHEN NEW.kind = 4 AND NEW.ref > handled_seq THEN NEW.ref
                           ELSE handled_seq END
    WHERE id = NEW.id >> 32;
END;
CREATE TRIGGER IF NOT EXISTS entries_insert INSTEAD OF INSERT ON entries BEGIN
    SELECT RAISE(ABORT, 'actorlog: seq conflict')
    WHERE typeof(NEW.seq) != 'integer' OR NEW.seq NOT BETWEEN 1 AND {MAX_SEQ}
       OR coalesce({_ACTOR_KEY.format("NEW.actor_id")}, {MAX_ACTOR_KEY + 1}) > {MAX_ACTOR_KEY};
    INSERT OR IGNORE INTO tags (tag) VALUES (NEW.type_tag);
    INSERT INTO log ({LOG5_COLS}) VALUES (
        {_KEY5.format("NEW.actor_id")} + NEW.seq, {_kind_code("NEW.kind")},
        {_TAG_KEY.format("NEW.type_tag")}, NEW.ref, NEW.message_id, NEW.payload,
        {_signed("NEW.checksum")});
END;
CREATE TRIGGER IF NOT EXISTS entries_update INSTEAD OF UPDATE ON entries BEGIN
    INSERT OR IGNORE INTO tags (tag) VALUES (NEW.type_tag);
    UPDATE log SET id = {_KEY5.format("NEW.actor_id")} + NEW.seq,
        kind = {_kind_code("NEW.kind")}, tag = {_TAG_KEY.format("NEW.type_tag")},
        ref = NEW.ref, message_id = NEW.message_id, payload = NEW.payload,
        checksum = {_signed("NEW.checksum")}
    WHERE id = {_KEY5.format("OLD.actor_id")} + OLD.seq;
END;
CREATE TRIGGER IF NOT EXISTS entries_delete INSTEAD OF DELETE ON entries BEGIN
    DELETE FROM log WHERE id = {_KEY5.format("OLD.actor_id")} + OLD.seq;
END;
-- an UPDATE through the view keeps the row in its actor's range of rowids, as an INSERT
-- does (a seq past the bound would move it into the next actor's log): a trigger of its
-- own, so a format-5 file made before it gains it on open (CREATE ... IF NOT EXISTS); its
-- ABORT backs out the statement, whichever of the view's triggers ran first
CREATE TRIGGER IF NOT EXISTS entries_update_check INSTEAD OF UPDATE ON entries BEGIN
    SELECT RAISE(ABORT, 'actorlog: seq conflict')
    WHERE typeof(NEW.seq) != 'integer' OR NEW.seq NOT BETWEEN 1 AND {MAX_SEQ}
       OR coalesce({_ACTOR_KEY.format("NEW.actor_id")}, {MAX_ACTOR_KEY + 1}) > {MAX_ACTOR_KEY};
END;
CREATE TABLE IF NOT EXISTS log_starts (
    actor_id  TEXT PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    checksum  INTEGER NOT NULL,
    at        REAL    NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS log_starts_check BEFORE INSERT ON log_starts BEGIN
    SELECT RAISE(ABORT, 'actorlog: compaction must keep the last entry')
    WHERE NEW.first_seq > coalesce(
        (SELECT last_seq FROM actors WHERE actor_id = NEW.actor_id), 0);
END;
CREATE TRIGGER IF NOT EXISTS log_starts_compact AFTER INSERT ON log_starts BEGIN
    DELETE FROM log WHERE id > {_KEY5.format("NEW.actor_id")}
        AND id < {_KEY5.format("NEW.actor_id")} + NEW.first_seq;
    UPDATE actors SET first_seq = NEW.first_seq WHERE actor_id = NEW.actor_id;
END;
"""

#: The audit trigger's deletion of an actor's log rows in a format-5 file.
DELETE_LOG5 = (
    f"DELETE FROM log WHERE id > {_KEY5.format('NEW.actor_id')} "
    f"AND id <= {_KEY5.format('NEW.actor_id')} + {MAX_SEQ};"
)


def read5(kinds: int | None, limit: bool) -> str:
    """``Store.read`` in a format-5 file, taking ``(after, upto, actor_id, *kind codes,
    limit)``: the stored payloads ([F21]: unpacked by the store), by seq."""
    sql = (
        f"SELECT {_SELECT5.format(payload='l.payload')} {_FROM5.format(lo='?', hi='?')} "
        "WHERE a.actor_id = ?"
    )
    if kinds is not None:
        sql += " AND l.kind IN (" + ",".join("?" * kinds) + ")"
    return sql + " ORDER BY l.id" + (" LIMIT ?" if limit else "")


#: ``find_ref`` in a format-5 file, taking ``(ref, actor_id, kind code, ref)``: the entries
#: of a kind after ``ref`` that refer to it (a ref always points back), by seq; the step of
#: a message too (a repeated ``ask``): there is no step index, the scan starts at its message
REF5 = (
    f"SELECT {_SELECT5.format(payload='l.payload')} "
    f"{_FROM5.format(lo='?', hi=MAX_SEQ)} "
    "WHERE a.actor_id = ? AND l.kind = ? AND l.ref = ? ORDER BY l.id"
)

#: ``find_message`` in a format-5 file, taking ``(message_id, actor_id)``: the row the
#: message-id index finds, its columns read from the table by its rowid
MESSAGE5 = (
    f"SELECT {_SELECT5.format(payload='l.payload')} FROM actors AS a JOIN log AS l ON l.id = "
    "(SELECT m.id FROM log AS m WHERE m.id >> 32 = a.id AND m.message_id = ?) "
    "LEFT JOIN tags AS t ON t.id = l.tag WHERE a.actor_id = ?"
)

#: The message ids of an actor's log in a format-5 file, from ``log_message_id`` alone.
MESSAGE_IDS5 = (
    "SELECT message_id FROM log WHERE id >> 32 = "
    + _ACTOR_KEY.format("?")
    + " AND message_id IS NOT NULL LIMIT ?"
)

#: Whether an actor's log holds a message id in a format-5 file, read from the table
#: (never through the message-id index: ``_sqlite_commit._explains``).
BY_PK_MESSAGE_ID5 = (
    f"SELECT 1 FROM actors AS a JOIN log AS l NOT INDEXED ON l.id > {_BASE} "
    f"AND l.id <= {_BASE} + {MAX_SEQ} WHERE a.actor_id = ? AND l.message_id = ? LIMIT 1"
)

#: The last seq of an actor's rows in a format-5 file (NULL: none), taking ``(actor_id,)``.
LAST_SEQ5 = (
    f"SELECT max(l.id) - {_BASE} FROM actors AS a JOIN log AS l ON l.id > {_BASE} "
    f"AND l.id <= {_BASE} + {MAX_SEQ} WHERE a.actor_id = ?"
)


def anchors5(n: int) -> str:
    """The stored ``(seq, kind, payload)`` of ``n`` entries of an actor in a format-5 file,
    taking ``(*seqs, actor_id)``."""
    return (
        f"SELECT l.id - {_BASE}, {_KIND_NAME}, l.payload FROM actors AS a JOIN log AS l "
        f"ON l.id IN ({','.join([f'{_BASE} + ?'] * n)}) WHERE a.actor_id = ?"
    )


#: Compaction's rows to store unpacked in a format-5 file ([F21]), taking ``(first - 1,
#: actor_id, first, first)``: the first kept entry, and the kept intents of removed messages.
KEPT5 = (
    f"SELECT {_SELECT5.format(payload='l.payload')} {_FROM5.format(lo='?', hi=MAX_SEQ)} "
    f"WHERE a.actor_id = ? AND (l.id = {_BASE} + ? OR (l.kind = 2 AND l.ref < ?)) ORDER BY l.id"
)

#: Store a kept entry unpacked, taking ``(payload, actor_id, seq, stored payload)``.
UNPACK_KEPT5 = "UPDATE log SET payload = ? WHERE id = " + _KEY5.format("?") + " + ? AND payload = ?"
