"""Format 3's SQLite layout (docs/FORMAT.md section 6, "Format 3"; files made in format 4,
whose tables are format 3's, [F21], as before format 5): the golden row of the documented example
entry, the schema of a new file, and damage to each field format 3
added (an actor's key, a kind or tag code, a tag's text) caught like damage to any column."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from actorlog import ops
from actorlog._journal.codec import make_row
from actorlog.stores import SqliteStore

from tests._sqlitefile import SqliteFile, new_files_in
from tests.stores.test_sqlite_damage import build, sql

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _format4_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """New files made in format 4 (format 3's tables), as before format 5."""
    new_files_in(monkeypatch, 4)


FIXTURES = Path(__file__).parents[1] / "upgrading" / "fixtures"
FIXTURE_V2 = FIXTURES / "payer_format_v2.db"

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
        assert store.layout == 4  # format 3's tables (a message is never packed)
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
    """FORMAT.md section 6: the example entry is the row (1, 1, 1, 1, 0, 'm1', payload,
    signed checksum) of ``log``, with record serial types (9, 9, 9, 9, 8, 17, 26, 4): the
    integers 1 and 0 in no bytes, the checksum in 4; the view ``entries`` shows format 2's
    columns."""
    path = tmp_path / "agents.db"
    await _write_example(path)
    assert _rows(path, "SELECT value FROM actorlog_meta WHERE key = 'format_version'") == [("4",)]
    assert _rows(path, "SELECT * FROM log") == [
        (1, 1, 1, 1, 0, "m1", b'{"x":1}', EXAMPLE_CRC - 2**32)
    ]
    assert _rows(path, "SELECT * FROM tags") == [(1, "t.Msg")]
    assert _rows(path, "SELECT id, actor_id FROM actors") == [(1, "a1")]
    assert _rows(path, "SELECT * FROM entries") == [(*EXAMPLE, EXAMPLE_CRC)]
    (record,) = SqliteFile.read(path).records("log")
    assert record.types == (9, 9, 9, 9, 8, 17, 26, 4)
    assert record.key == ("a1", 1)
    kinds = {
        str(name): kind
        for name, kind in _rows(path, "SELECT name, type FROM sqlite_master WHERE name != ''")
    }
    for name, kind in {
        "log": "table",
        "tags": "table",
        "entries": "view",
        "log_message_id": "index",
        "log_step": "index",
        "log_contiguous": "trigger",
        "log_summary": "trigger",
        "entries_insert": "trigger",
    }.items():
        assert kinds[name] == kind, name
    assert "entries_message_id" not in kinds and "entries_step" not in kinds


async def test_sql_typed_by_hand_through_the_view_keeps_the_log_checked(tmp_path: Path) -> None:
    """The view's triggers write ``log`` as the store does: an append out of order or for an
    unknown actor is refused by the append trigger; an update and a delete reach the row."""
    path = tmp_path / "agents.db"
    await _write_example(path)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for values in (("a1", 3), ("nobody", 1)):
            with pytest.raises(sqlite3.IntegrityError, match="seq conflict"):
                db.execute(
                    "INSERT INTO entries VALUES (?, ?, 'intent', 'tool', 1, NULL, x'5b5d', 0)",
                    values,
                )
        db.execute("INSERT INTO entries VALUES ('a1', 2, 'intent', 'tool', 1, NULL, x'5b5d', 7)")
        db.execute("UPDATE entries SET checksum = 4294967295 WHERE actor_id = 'a1' AND seq = 2")
        assert db.execute("SELECT kind, tag, checksum FROM log WHERE seq = 2").fetchall() == [
            (2, 2, -1)
        ]
        db.execute("DELETE FROM entries WHERE actor_id = 'a1' AND seq = 2")
        assert db.execute("SELECT count(*) FROM log").fetchone() == (1,)
    finally:
        db.close()


_VICTIM = "(SELECT id FROM actors WHERE actor_id = 'victim')"
_AT5 = f" WHERE actor = {_VICTIM} AND seq = 5"  # the victim's third message
_LAST = f" WHERE actor = {_VICTIM} AND seq = (SELECT max(seq) FROM log WHERE actor = {_VICTIM})"


@pytest.mark.parametrize(
    ("damage", "statement", "check"),
    [
        # a kind code flipped to another kind: the frame's kind code differs
        ("kind code", "UPDATE log SET kind = 5" + _AT5, "checksum"),
        # ... or to a code without a meaning, or to another storage class
        ("kind code", "UPDATE log SET kind = 9" + _AT5, "column type"),
        ("kind code", "UPDATE log SET kind = 1.5" + _AT5, "column type"),
        # a tag code pointing at another tag, or at none
        ("tag code", "UPDATE log SET tag = tag % 2 + 1" + _AT5, "checksum"),
        ("tag code", "UPDATE log SET tag = 99" + _AT5, "column type"),
        # a tag's text: every entry with that tag
        ("tag text", "UPDATE tags SET tag = tag || 'x' WHERE id = 1", "checksum"),
        # a row moved out of its actor's log (its key flipped): a gap in the seq chain
        ("actor key", "UPDATE log SET actor = 99" + _AT5, "seq chain"),
        # the last row moved out: the log ends before actors.last_seq
        ("actor key", "UPDATE log SET actor = 99" + _LAST, "seq chain"),
        # the actor's own key: its whole log is gone from under it
        ("actor key", "UPDATE actors SET id = 99 WHERE actor_id = 'victim'", "seq chain"),
        # a checksum out of the signed 32-bit range it is stored in
        ("checksum", "UPDATE log SET checksum = checksum + 4294967296" + _AT5, "column type"),
    ],
)  # fmt: skip
async def test_damage_to_a_field_of_format_3_is_found(
    tmp_path: Path, damage: str, statement: str, check: str
) -> None:
    path = tmp_path / "agents.db"
    await build(path)
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        clean = await ops.verify(store)
    finally:
        await store.close()
    assert clean.ok, clean.findings
    sql(path, statement)
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        report = await ops.verify(store)
    finally:
        await store.close()
    found = {(f.actor_id, f.check) for f in report.findings}
    assert ("victim", check) in found, (damage, report.findings)
    if damage != "tag text":  # a tag is shared by every actor's entries
        assert not {f for f in found if f[0] == "bystander"}, found


@pytest.mark.parametrize("layout", [2, 3, 4])
async def test_the_step_lookup_reads_the_step_index(tmp_path: Path, layout: int) -> None:
    """A repeated ``ask`` finds its message's step through the step index (``log_step``,
    ``entries_step`` in a file of format 2), not by reading the actor's log through the
    primary key, which SQLite's planner picks for these ``WITHOUT ROWID`` tables unless the
    index is named."""
    path = tmp_path / "agents.db"
    if layout < 4:
        shutil.copyfile(FIXTURES / f"payer_format_v{layout}.db", path)
    store = SqliteStore(path)
    await store.open()
    try:
        assert store.layout == layout
        await store.register_actor("a1", "t.A")
        sql = store._step_sql
    finally:
        await store.close()
    plan = " ".join(str(r[3]) for r in _rows(path, "EXPLAIN QUERY PLAN " + sql.replace("?", "1")))
    assert ("log_step" if layout >= 3 else "entries_step") in plan, plan
