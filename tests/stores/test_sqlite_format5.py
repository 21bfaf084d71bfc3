"""Format 5's SQLite layout (docs/FORMAT.md section 6, "Format 5" [F24]): the golden row of
the documented example entry (the rowid ``actor << 32 | seq``), the schema of a new file,
SQL typed by hand through the view, damage to a rowid, a code or a checksum caught like
damage to any column, the store's queries reading a range of rowids or the message-id index
(never the whole table), the seq bound, and one actor's lookups never reaching another's
rows. The packed payloads are format 4's: tests/stores/test_sqlite_format4.py and
test_sqlite_unpack.py run on both layouts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from actorlog import ops
from actorlog._journal.codec import make_row
from actorlog.store import FORMAT_VERSION, ConfigurationError
from actorlog.stores import SqliteStore
from actorlog.stores._sqlite_schema3 import (
    BY_PK_MESSAGE_ID5,
    LAST_SEQ5,
    MESSAGE5,
    MESSAGE_IDS5,
    REF5,
    anchors5,
    read5,
)

from tests._sqlitefile import SqliteFile
from tests.stores.test_sqlite_damage import build, sql

pytestmark = pytest.mark.anyio

#: FORMAT.md [F6]'s example entry, and its checksum
EXAMPLE = ("a1", 1, "message", "t.Msg", 0, "m1", b'{"x":1}')
EXAMPLE_CRC = 0xFF161B6D


def _rows(path: Path, query: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


async def _write_example(path: Path) -> None:
    store = SqliteStore(path)
    await store.open()
    try:
        assert store.layout == 5
        await store.register_actor("a1", "t.A")
        row = make_row(*EXAMPLE)
        assert row.checksum == EXAMPLE_CRC
        await store.append("a1", 0, [row])
        assert await store.read("a1") == [row]
        assert await store.find_message("a1", "m1") == row
    finally:
        await store.close()
    _rows(path, "PRAGMA wal_checkpoint(TRUNCATE)")


async def test_a_new_file_stores_the_documented_row(tmp_path: Path) -> None:
    """FORMAT.md [F24]: the example entry is the row (2**32 + 1, 1, 1, 0, 'm1', payload,
    signed checksum) of ``log``: its key in the rowid (the record's ``id`` column NULL), the
    record's serial types (0, 9, 9, 8, 17, 26, 4); the view ``entries`` shows format 2's
    columns."""
    path = tmp_path / "agents.db"
    await _write_example(path)
    assert FORMAT_VERSION == 5
    assert _rows(path, "SELECT value FROM actorlog_meta WHERE key = 'format_version'") == [("5",)]
    assert _rows(path, "SELECT * FROM log") == [
        (2**32 + 1, 1, 1, 0, "m1", b'{"x":1}', EXAMPLE_CRC - 2**32)
    ]
    assert _rows(path, "SELECT * FROM entries") == [(*EXAMPLE, EXAMPLE_CRC)]
    (record,) = SqliteFile.read(path).records("log")
    assert record.rowid == 2**32 + 1 and record.key == ("a1", 1)
    assert record.types[1:] == (0, 9, 9, 8, 17, 26, 4)  # [0] repeats the id's, for the actor
    kinds = {
        str(name): kind
        for name, kind in _rows(path, "SELECT name, type FROM sqlite_master WHERE name != ''")
    }
    for name, kind in {
        "log": "table",
        "tags": "table",
        "entries": "view",
        "log_message_id": "index",
        "log_contiguous": "trigger",
        "log_summary": "trigger",
        "entries_insert": "trigger",
        "log_starts_compact": "trigger",
    }.items():
        assert kinds[name] == kind, name
    # no step index, no second view, no b-tree of the meta table's or log starts' keys
    for gone in ("log_step", "log_rows", "sqlite_autoindex_actorlog_meta_1"):
        assert gone not in kinds, gone
    assert "sqlite_autoindex_log_starts_1" not in kinds


async def test_sql_typed_by_hand_through_the_view_keeps_the_log_checked(tmp_path: Path) -> None:
    """The view's triggers write ``log`` as the store does: an append out of order, for an
    unknown actor or with a seq outside 1 .. 2**32 - 1 is refused; an update and a delete
    reach the row."""
    path = tmp_path / "agents.db"
    await _write_example(path)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for values in (("a1", 3), ("nobody", 1), ("a1", 0), ("a1", 2**32), ("a1", -1)):
            with pytest.raises(sqlite3.IntegrityError, match="seq conflict"):
                db.execute(
                    "INSERT INTO entries VALUES (?, ?, 'intent', 'tool', 1, NULL, x'5b5d', 0)",
                    values,
                )
        db.execute("INSERT INTO entries VALUES ('a1', 2, 'intent', 'tool', 1, NULL, x'5b5d', 7)")
        db.execute("UPDATE entries SET checksum = 4294967295 WHERE actor_id = 'a1' AND seq = 2")
        assert db.execute(
            "SELECT id, kind, tag, checksum FROM log WHERE id = 4294967298"
        ).fetchall() == [(2**32 + 2, 2, 2, -1)]
        assert db.execute("SELECT last_seq FROM actors").fetchall() == [(2,)]
        db.execute("DELETE FROM entries WHERE actor_id = 'a1' AND seq = 2")
        assert db.execute("SELECT count(*) FROM log").fetchone() == (1,)
    finally:
        db.close()


_VICTIM = "((SELECT id FROM actors WHERE actor_id = 'victim') << 32)"
_AT5 = f" WHERE id = {_VICTIM} + 5"  # the victim's third message
_LAST = f" WHERE id = (SELECT max(id) FROM log WHERE id >> 32 = {_VICTIM} >> 32)"


@pytest.mark.parametrize(
    ("damage", "statement", "check"),
    [
        # a kind code flipped to another kind, to a code without a meaning, another class
        ("kind code", "UPDATE log SET kind = 5" + _AT5, "checksum"),
        ("kind code", "UPDATE log SET kind = 9" + _AT5, "column type"),
        ("kind code", "UPDATE log SET kind = 1.5" + _AT5, "column type"),
        # a tag code pointing at another tag, or at none
        ("tag code", "UPDATE log SET tag = tag % 2 + 1" + _AT5, "checksum"),
        ("tag code", "UPDATE log SET tag = 99" + _AT5, "column type"),
        # a row's rowid moved to another seq (a gap, then a seq out of order) or actor
        ("rowid", "UPDATE log SET id = id + 1000" + _AT5, "seq chain"),
        ("rowid", "UPDATE log SET id = id + (99 << 32)" + _AT5, "seq chain"),
        # the last row moved out: the log ends before actors.last_seq
        ("rowid", "UPDATE log SET id = id + (99 << 32)" + _LAST, "seq chain"),
        # the actor's own key: its whole log is gone from under it
        ("actor key", "UPDATE actors SET id = 99 WHERE actor_id = 'victim'", "seq chain"),
        # a checksum out of the signed 32-bit range it is stored in
        ("checksum", "UPDATE log SET checksum = checksum + 4294967296" + _AT5, "column type"),
        ("checksum", "UPDATE log SET checksum = checksum # 1" + _AT5, "checksum"),
    ],
)  # fmt: skip
async def test_damage_to_a_field_of_format_5_is_found(
    tmp_path: Path, damage: str, statement: str, check: str
) -> None:
    path = tmp_path / "agents.db"
    await build(path)
    assert _rows(path, "SELECT value FROM actorlog_meta WHERE key = 'format_version'") == [("5",)]
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        clean = await ops.verify(store)
    finally:
        await store.close()
    assert clean.ok, clean.findings
    sql(path, _xor(statement))
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        report = await ops.verify(store)
    finally:
        await store.close()
    found = {(f.actor_id, f.check) for f in report.findings}
    assert ("victim", check) in found, (damage, report.findings)
    assert not {f for f in found if f[0] == "bystander"}, found


def _xor(statement: str) -> str:
    """SQLite has no ``^``: ``x # 1`` is ``(x | 1) - (x & 1)``, the low bit flipped."""
    return statement.replace("checksum # 1", "(checksum | 1) - (checksum & 1)")


def _plan(path: Path, query: str, params: tuple[object, ...]) -> str:
    return " ".join(str(r[3]) for r in _rows_params(path, "EXPLAIN QUERY PLAN " + query, params))


def _rows_params(path: Path, query: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(query, params).fetchall()
    finally:
        db.close()


async def test_the_stores_queries_read_a_range_of_rowids_or_the_message_id_index(
    tmp_path: Path,
) -> None:
    """Every query of the store in a format-5 file finds an actor's rows as a range of the
    table's rowids (or through ``log_message_id``), never by scanning ``log``: a read from
    a seq, a message by id, the message ids, a ref's entries, the anchors of packed rows,
    the last seq, a message id read past the index."""
    path = tmp_path / "agents.db"
    await build(path)
    queries = {
        "read": (read5(2, True), (3, 9, "victim", 1, 4, 10)),
        "read all": (read5(None, False), (0, 2**32 - 1, "victim")),
        "message": (MESSAGE5, ("victim-2", "victim")),
        "ref": (REF5, (3, "victim", 4, 3)),
        "anchors": (anchors5(2), (4, 7, "victim")),
        "last seq": (LAST_SEQ5, ("victim",)),
        "past the index": (BY_PK_MESSAGE_ID5, ("victim", "victim-2")),
    }
    for name, (query, params) in queries.items():
        plan = _plan(path, query, params)
        assert "SCAN l" not in plan and "SCAN log" not in plan, (name, plan)
        assert "USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in plan or (
            "USING INTEGER PRIMARY KEY (rowid=?)" in plan
        ), (name, plan)
        if name == "message":
            assert "log_message_id" in plan, plan
        if name == "past the index":
            assert "log_message_id" not in plan, plan
    plan = _plan(path, MESSAGE_IDS5, ("victim", 10))
    assert "COVERING INDEX log_message_id" in plan, plan


async def test_one_actors_lookups_never_reach_anothers_rows(tmp_path: Path) -> None:
    """Two actors whose logs hold the same seqs, refs and message ids: each read, lookup by
    message id and by ref, and the message ids, finds its own actor's rows only."""
    store = SqliteStore(tmp_path / "agents.db")
    await store.open()
    try:
        logs = {}
        for actor_id in ("a", "b", "c"):
            await store.register_actor(actor_id, "t.A")
            w = actor_id.encode()
            rows = [
                make_row(actor_id, 1, "message", "t.M", 0, "m1", b'[{"who":"%s"},1,"i"]' % w),
                make_row(actor_id, 2, "intent", "t.T", 1, None, b'[0,1,1,[],"k",2]'),
                make_row(actor_id, 3, "result", "t.T", 2, None, b'[true,"%s",3]' % w),
                make_row(actor_id, 4, "step", "t.M", 1, None, b'[true,"%s",4]' % w),
            ]
            await store.append(actor_id, 0, rows[:2])
            await store.append(actor_id, 2, rows[2:])
            logs[actor_id] = rows
        for actor_id, rows in logs.items():
            assert await store.read(actor_id) == rows
            assert await store.read(actor_id, after_seq=2, limit=1) == rows[2:3]
            assert await store.read(actor_id, kinds=["step", "message"]) == [rows[0], rows[3]]
            assert await store.find_message(actor_id, "m1") == rows[0]
            assert await store.find_ref(actor_id, "step", 1) == [rows[3]]
            assert await store.find_ref(actor_id, "result", 2) == [rows[2]]
            assert await store.message_ids(actor_id, limit=5) == ["m1"]
        assert await store.read("a", after_seq=2**40) == []
        assert await store.find_ref("a", "nonsense", 1) == []
        assert await store.find_message("nobody", "m1") is None
    finally:
        await store.close()


async def test_a_seq_beyond_the_format_is_refused_at_the_call(tmp_path: Path) -> None:
    """A format-5 file keeps seqs up to 2**32 - 1 per actor (the low half of the rowid): an
    append beyond is bad input (``ConfigurationError``), and nothing is stored."""
    store = SqliteStore(tmp_path / "agents.db")
    await store.open()
    try:
        await store.register_actor("a", "t.A")
        far = make_row("a", 2**32, "message", "t.M", 0, "m", b"[{},1]")
        with pytest.raises(ConfigurationError, match="seqs up to 4294967295"):
            await store.append("a", 2**32 - 1, [far])
        assert await store.read("a") == []
        actor = await store.get_actor("a")
        assert actor is not None and actor.last_seq == 0
    finally:
        await store.close()
