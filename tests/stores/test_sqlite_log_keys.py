"""Format 4's and 5's appends straight into ``log`` (``_sqlite_commit.LogKeys``): once the
store knows the file's keys of an actor and of a tag, it inserts their rows into ``log``
itself instead of through the view ``entries`` and its insert trigger. Checked here: the rows
stored are the ones the trigger stores (every column, its storage class, the summary rows),
the direct path is taken, and a key is never used for an actor that does not own it (a
deleted actor's key reused by a new one).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog._journal.codec import make_row
from actorlog.store import EntryRow, SequenceConflictError
from actorlog.stores import SqliteStore

from tests._sqlitefile import log_seq, new_files_in

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True, params=[4, 5], ids=["format4", "format5"])
def _layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """New files made in format 4 (format 3's tables) and in format 5 (a rowid ``log``)."""
    layout: int = request.param
    new_files_in(monkeypatch, layout)
    return layout


_COLS = "actor, seq, kind, tag, ref, message_id, payload, checksum"
_COLS5 = "id, kind, tag, ref, message_id, payload, checksum"


def _rows(actor_id: str, first: int) -> list[list[EntryRow]]:
    """Appends of every kind, with checksums on both sides of 2**31, a tag new in the middle
    of the log, message ids and none."""
    s = first
    msg = make_row(actor_id, s, "message", "t.Ask", 0, f"m{s}", b'[{"q":1},1795829010238,"ab"]')
    intent = make_row(actor_id, s + 1, "intent", "lookup", s, None, b'[0,1,1,["q"],"k",17]')
    result = make_row(actor_id, s + 2, "result", "lookup", s + 1, None, b'[true,"a",18,1]')
    effect = make_row(actor_id, s + 3, "effect", "now", s, None, b"[1795829010240,19]")
    decision = make_row(actor_id, s + 4, "decision", "attempt", s + 1, None, b'["runtime","x"]')
    step = make_row(actor_id, s + 5, "step", "t.Ask", s, None, b'[true,"a",20,645]')
    extra = make_row(actor_id, s + 6, "message", f"t.New{s}", 0, f"m{s + 6}", b"[{},21,null]")
    return [[msg, intent], [result], [effect, decision, step], [extra]]


def _raw_checksum(row: EntryRow, value: int) -> EntryRow:
    return EntryRow(
        row.actor_id, row.seq, row.kind, row.type_tag, row.ref, row.message_id, row.payload, value
    )


def _table(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as db:
        return [tuple(r) for r in db.execute(sql)]


def _log(path: Path) -> list[tuple[Any, ...]]:
    cols = _COLS if log_seq(path) == "seq" else _COLS5  # format 4, format 5
    typed = ", ".join(f"typeof({c.strip()})" for c in cols.split(","))
    return _table(path, f"SELECT {cols}, {typed} FROM log ORDER BY 1, 2")


async def _write(path: Path, *, through_view: bool) -> list[str]:
    """Three actors' logs, appended one by one and concurrently (shared batches); with
    ``through_view`` the store forgets every key before each append (the view's path).
    Returns the SQL the writer connection ran that inserted rows."""
    store = SqliteStore(path, commit_on_loop=False)
    await store.open()
    statements: list[str] = []
    conn = store._writer()._conn
    assert conn is not None
    conn.set_trace_callback(
        lambda sql: statements.append(sql) if sql.startswith("INSERT INTO") else None
    )
    try:
        ids = ["a", "b", "c"]
        for actor_id in ids:
            await store.register_actor(actor_id, "t.Agent")

        async def appends(actor_id: str, first: int) -> None:
            last = first - 1
            for rows in _rows(actor_id, first):
                if through_view:
                    store._actor_keys.clear()
                    store._tag_keys.clear()
                if actor_id == "b":  # a checksum with its high bit set, and one without
                    rows = [_raw_checksum(r, 0xFFFFFFFF - r.seq) for r in rows]
                await store.append(actor_id, last, rows)
                last = rows[-1].seq

        await appends("a", 1)
        async with anyio.create_task_group() as tg:  # shared batches
            for actor_id in ids:
                tg.start_soon(appends, actor_id, 8 if actor_id == "a" else 1)
        # values the runtime never writes (an unknown kind, checksums outside 32 bits) are
        # stored by the view's rules, whatever the store knows
        await store.register_actor("d", "t.Agent")
        await store.append("d", 0, _rows("d", 1)[0])
        odd = [
            EntryRow("d", 3, "bogus", "t.Ask", 0, None, b"[1]", 7),
            EntryRow("d", 4, "result", "lookup", 2, None, b"[true,1,2,3]", 1 << 40),
            EntryRow("d", 5, "result", "lookup", 2, None, b"[true,1,2,3]", -5),
        ]
        for row in odd:
            await store.append("d", row.seq - 1, [row])
    finally:
        await store.close()
    return statements


async def test_rows_inserted_straight_into_log_are_the_rows_the_view_stores(
    tmp_path: Path,
) -> None:
    direct = await _write(tmp_path / "direct.db", through_view=False)
    view = await _write(tmp_path / "view.db", through_view=True)
    assert any(s.startswith("INSERT INTO log ") for s in direct)
    assert not any(s.startswith("INSERT INTO log ") for s in view)
    assert _log(tmp_path / "direct.db") == _log(tmp_path / "view.db")
    assert len(_log(tmp_path / "direct.db")) == 14 + 7 + 7 + 5
    summary = "SELECT id, actor_id, last_seq, last_message_seq, handled_seq, first_seq FROM actors"
    for sql in (summary, "SELECT * FROM tags"):
        assert _table(tmp_path / "direct.db", sql) == _table(tmp_path / "view.db", sql)
    for name in ("direct.db", "view.db"):
        store = SqliteStore(tmp_path / name, read_only=True)
        await store.open()
        try:
            assert [r.seq for r in await store.read("a")] == list(range(1, 15))
            assert [r.checksum for r in await store.read("b")] == [
                0xFFFFFFFF - s for s in range(1, 8)
            ]
        finally:
            await store.close()


async def test_a_deleted_actors_key_is_never_used_for_another_actor(tmp_path: Path) -> None:
    """Deleting an actor deletes its ``actors`` row, and the next actor registered may get
    its integer key. An append to the deleted actor must not land in the new actor's log
    through a key the store remembered (the seq chain of the new, empty log would accept
    it): it is refused, as an append to an actor with no log."""
    store = SqliteStore(tmp_path / "a.db")
    await store.open()
    try:
        await store.register_actor("old", "t.Agent")
        for rows in _rows("old", 1)[:2]:  # the second append goes straight into log
            await store.append("old", rows[0].seq - 1, rows)
        await store.delete_actor("old", "test")
        await store.register_actor("new", "t.Agent")
        keys = _table(tmp_path / "a.db", "SELECT actor_id, id FROM actors")
        assert keys == [("new", 1)]  # the deleted actor's key, taken by the new one
        with pytest.raises(SequenceConflictError):
            await store.append("old", 0, _rows("old", 1)[0])
        assert await store.read("new") == []
        # registered again, the old id gets a key of its own and its log its rows
        await store.register_actor("old", "t.Agent")
        for rows in _rows("old", 1)[:2]:
            await store.append("old", rows[0].seq - 1, rows)
        assert [r.seq for r in await store.read("old")] == [1, 2, 3]
        assert await store.read("new") == []
    finally:
        await store.close()
