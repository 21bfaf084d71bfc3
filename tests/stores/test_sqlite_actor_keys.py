"""An outside reader's checks of the actor keys of a SQLite file (docs/FORMAT.md section 6,
"Format 3" and "Format 5" [F24]), in a format-5 file beside a format-4 one: many actors
(keys past the varint steps of the rowid), an actor deleted and its id registered again
(the key given again never finds the earlier actor's rows, compaction record, snapshots or
message ids), and a key beyond format 5's bound (an ``actors`` row given its ``id`` by hand)
refused at the call with ``ConfigurationError`` and nothing written. Only the store's public
calls and SQL typed by hand, as FORMAT.md shows it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog import ops
from actorlog.store import AuditStore, ConfigurationError, EntryRow
from actorlog.stores import SqliteStore
from actorlog.testing import log_start_checksum, make_entry

from tests._sqlitefile import new_files_in

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[4, 5], ids=["format4", "format5"])
def layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """New files made in format ``layout``, as that version of actorlog made them."""
    value: int = request.param
    new_files_in(monkeypatch, value)
    return value


def _ask(actor_id: str, first: int, mid: str, reply: str) -> list[EntryRow]:
    """The four entries of an ask whose step makes one call, from seq ``first``."""
    m = first
    body = b'[{"q":"%s"},1,"inc"]' % mid.encode()
    return [
        make_entry(actor_id, m, "message", "t.Ask", 0, message_id=mid, payload=body),
        make_entry(actor_id, m + 1, "intent", "lookup", m, payload=b'[0,0,0,[],"k",1]'),
        make_entry(actor_id, m + 2, "result", "lookup", m + 1, payload=b'[true,"r",2,1]'),
        make_entry(
            actor_id, m + 3, "step", "t.Ask", m, payload=b'[true,"%s",3,1]' % reply.encode()
        ),
    ]


def _sql(path: Path, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(query, params).fetchall()
    finally:
        db.close()


async def test_many_actors_each_find_only_their_own_rows(tmp_path: Path, layout: int) -> None:
    """1,100 actors (keys past 8 and 1,024, where format 5's rowid takes a byte more), each
    with the same message id and seqs: every read, lookup by message id, step lookup of a
    repeated ask and the message ids give the actor's own rows; ``entries`` typed by hand
    shows each; ``verify`` is clean; the file keeps its format."""
    path = tmp_path / "agents.db"
    ids = [f"a{i:04d}" for i in range(1, 1101)]
    store = SqliteStore(path, durability="survive-process-crash")
    await store.open()
    try:
        assert store.layout == layout
        async with anyio.create_task_group() as tg:  # registrations and appends share commits
            for actor_id in ids:
                tg.start_soon(store.register_actor, actor_id, "t.A")
        async with anyio.create_task_group() as tg:
            for actor_id in ids:
                tg.start_soon(store.append, actor_id, 0, _ask(actor_id, 1, "m1", actor_id))
        for actor_id in (*ids[:10], *ids[125:130], *ids[1020:1030], ids[-1]):
            rows = _ask(actor_id, 1, "m1", actor_id)
            assert await store.read(actor_id) == rows
            assert await store.read(actor_id, after_seq=3) == rows[3:]
            assert await store.find_message(actor_id, "m1") == rows[0]
            assert await store.find_ref(actor_id, "step", 1) == [rows[3]]
            assert await store.message_ids(actor_id, limit=5) == ["m1"]
        assert await store.find_message("a9999", "m1") is None
    finally:
        await store.close()
    assert _sql(path, "SELECT max(id) FROM actors") == [(1100,)]
    # SQL typed by hand: an actor's rows through the view, by seq
    got = _sql(path, "SELECT * FROM entries WHERE actor_id = ? ORDER BY seq", ("a1100",))
    assert [EntryRow(*r) for r in got] == _ask("a1100", 1, "m1", "a1100")
    assert _sql(path, "SELECT count(*) FROM entries") == [(4 * 1100,)]
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        report = await ops.verify(store)
        assert store.layout == layout
    finally:
        await store.close()
    assert report.ok and report.entries == 4 * 1100, report.findings
    assert _sql(path, "SELECT value FROM actorlog_meta WHERE key = 'format_version'") == [
        (str(layout),)
    ]


async def test_an_id_registered_again_starts_a_new_log(tmp_path: Path, layout: int) -> None:
    """An actor compacted, then deleted (the actor with the highest key, whose key the next
    registration is given again, and one in the middle), and its id registered again: the
    new actor's log starts at seq 1 with no compaction record; the old message ids, steps
    and snapshots are gone; its neighbours are untouched; ``verify`` is clean."""
    path = tmp_path / "agents.db"
    store = SqliteStore(path)
    await store.open()
    try:
        assert isinstance(store, AuditStore)
        for actor_id in ("low", "mid", "top"):
            await store.register_actor(actor_id, "t.A")
            for k in range(3):
                await store.append(actor_id, 4 * k, _ask(actor_id, 4 * k + 1, f"m{k}", "old"))
            await store.compact(actor_id, 4, checksum=log_start_checksum(actor_id, 5))
        keys = dict(_sql(path, "SELECT actor_id, id FROM actors"))
        for actor_id in ("top", "mid"):
            await store.delete_actor(actor_id, '{"by":"test"}')
        await store.register_actor("top", "t.A")
        await store.register_actor("mid", "t.A")
        new_keys = dict(_sql(path, "SELECT actor_id, id FROM actors"))
        # the deleted actors' keys given again (here each to the other's id)
        assert {new_keys["top"], new_keys["mid"]} == {keys["top"], keys["mid"]}
        for actor_id in ("top", "mid"):
            actor = await store.get_actor(actor_id)
            assert actor is not None and (actor.last_seq, actor.first_seq) == (0, 0)
            assert await store.read(actor_id) == []
            assert await store.find_message(actor_id, "m2") is None
            assert await store.find_ref(actor_id, "step", 9) == []
            assert await store.message_ids(actor_id, limit=5) == []
            assert await store.log_start(actor_id) is None
            assert await store.list_snapshots(actor_id) == []
            # the id's new log: seq 1, and an old message id is a new message
            rows = _ask(actor_id, 1, "m2", "new")
            await store.append(actor_id, 0, rows)
            assert await store.read(actor_id) == rows
            assert await store.find_ref(actor_id, "step", 1) == [rows[3]]
        low = await store.read("low")
        assert [r.seq for r in low] == list(range(5, 13))
        start = await store.log_start("low")
        assert start is not None and (start.first_seq, start.checksum) == (
            5,
            log_start_checksum("low", 5),
        )
    finally:
        await store.close()
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        report = await ops.verify(store)
    finally:
        await store.close()
    assert report.ok, report.findings
    assert sorted(_sql(path, "SELECT actor_id, first_seq FROM log_starts")) == [("low", 5)]


async def test_an_actor_key_beyond_format_5_is_bad_input(tmp_path: Path, layout: int) -> None:
    """FORMAT.md [F24]: a format-5 file's actor keys are 1 to 2**31 - 1. An ``actors`` row
    given a larger ``id`` by hand cannot hold entries: its append is refused at the call
    with ``ConfigurationError`` (not reported as damage) and a registration that would be
    given a key beyond is refused too; nothing is written, and the other actors go on. A
    format-4 file has no such bound: the same row takes entries."""
    path = tmp_path / "agents.db"
    store = SqliteStore(path)
    await store.open()
    try:
        await store.register_actor("a", "t.A")
        await store.append("a", 0, _ask("a", 1, "m1", "x"))
    finally:
        await store.close()
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO actors (id, actor_id, actor_type, created_at) VALUES (?, 'big', 't.A', 0)",
        (2**31,),
    )
    db.commit()
    db.close()
    before = _sql(path, "SELECT * FROM actors ORDER BY id"), _sql(path, "SELECT * FROM entries")
    store = SqliteStore(path)
    await store.open()
    try:
        if layout == 4:
            await store.append("big", 0, _ask("big", 1, "m1", "x"))
            assert await store.find_ref("big", "step", 1) == _ask("big", 1, "m1", "x")[3:]
            await store.register_actor("next", "t.A")
            return
        with pytest.raises(ConfigurationError, match="actor keys 1 to 2147483647"):
            await store.append("big", 0, _ask("big", 1, "m1", "x"))
        with pytest.raises(ConfigurationError, match="actor keys 1 to 2147483647"):
            await store.register_actor("next", "t.A")
        assert await store.get_actor("next") is None
        # the actors below the bound go on
        await store.append("a", 4, _ask("a", 5, "m2", "y"))
        assert [r.seq for r in await store.read("a")] == list(range(1, 9))
    finally:
        await store.close()
    actors, entries = before
    assert _sql(path, "SELECT * FROM actors WHERE actor_id != 'a' ORDER BY id") == [
        r for r in actors if r[1] != "a"
    ]
    assert _sql(path, "SELECT * FROM entries WHERE actor_id != 'a'") == [
        r for r in entries if r[0] != "a"
    ]


async def test_the_last_seq_of_the_format_is_an_actors_own(tmp_path: Path, layout: int) -> None:
    """The edge of format 5's rowid arithmetic: an actor whose log reaches seq 2**32 - 1 (its
    summary set there by SQL typed by hand, the log's first rows by the store) keeps its
    rows apart from the next actor's seq 1 (the rowid just after): reads, the lookup by
    message id, the step lookup and the view all give each actor its own; an append past the
    bound is refused in format 5 and nothing is written."""
    top = 2**32 - 1
    path = tmp_path / "agents.db"
    store = SqliteStore(path)
    await store.open()
    try:
        for actor_id in ("a", "b"):
            await store.register_actor(actor_id, "t.A")
    finally:
        await store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE actors SET last_seq = ? WHERE actor_id = 'a'", (top - 4,))
    db.commit()
    db.close()
    store = SqliteStore(path)
    await store.open()
    try:
        high = _ask("a", top - 3, "m1", "top")
        low = _ask("b", 1, "m1", "bottom")
        await store.append("a", top - 4, high)
        await store.append("b", 0, low)
        assert await store.read("a") == high
        assert await store.read("a", after_seq=top - 1) == high[3:]
        assert await store.read("b") == low
        assert await store.find_message("a", "m1") == high[0]
        assert await store.find_message("b", "m1") == low[0]
        assert await store.find_ref("a", "step", top - 3) == high[3:]
        assert await store.find_ref("b", "step", 1) == low[3:]
        assert sorted(await store.message_ids("a", limit=5) or []) == ["m1"]
        more = make_entry("a", top + 1, "message", "t.Ask", 0, message_id="m2", payload=b"[{},1]")
        if layout == 5:
            with pytest.raises(ConfigurationError, match="seqs up to 4294967295"):
                await store.append("a", top, [more])
            assert await store.read("a") == high
            assert await store.read("b") == low
    finally:
        await store.close()
    assert _sql(path, "SELECT actor_id, seq FROM entries ORDER BY actor_id, seq") == [
        *[("a", r.seq) for r in high],
        *[("b", r.seq) for r in low],
    ]


async def test_sql_typed_by_hand_keeps_a_row_in_its_actors_log(tmp_path: Path, layout: int) -> None:
    """FORMAT.md section 6: the view ``entries`` takes ``UPDATE`` typed by hand and codes it
    as the store does. In format 5 an update giving a row a seq outside 1 .. 2**32 - 1 is
    refused like such an insert (``seq conflict``): it would move the row into the next
    actor's range of rowids, damaging a log nobody touched. Also in a format-5 file made
    before the check (the trigger gained when the file is next opened for writing). In
    format 4 the row stays its actor's whatever its seq."""
    path = tmp_path / "agents.db"
    store = SqliteStore(path)
    await store.open()
    try:
        for actor_id in ("a", "b"):
            await store.register_actor(actor_id, "t.A")
            await store.append(actor_id, 0, _ask(actor_id, 1, "m1", actor_id))
    finally:
        await store.close()
    if layout == 5:  # as a file made before the check: the next writable open adds it
        _sql(path, "DROP TRIGGER IF EXISTS entries_update_check")
        store = SqliteStore(path)
        await store.open()
        await store.close()
    b_before = _sql(path, "SELECT * FROM entries WHERE actor_id = 'b'")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for seq in (2**32 + 1, 0, -1):
            query = "UPDATE entries SET seq = ? WHERE actor_id = 'a' AND seq = 4"
            if layout == 5:
                with pytest.raises(sqlite3.IntegrityError, match="seq conflict"):
                    db.execute(query, (seq,))
            else:
                db.execute(query, (seq,))
                db.execute("UPDATE entries SET seq = 4 WHERE actor_id = 'a' AND seq = ?", (seq,))
        # an update within the bound reaches the row, as before
        db.execute("UPDATE entries SET checksum = 7 WHERE actor_id = 'a' AND seq = 4")
        assert db.execute(
            "SELECT seq, checksum FROM entries WHERE actor_id = 'a' AND seq = 4"
        ).fetchall() == [(4, 7)]
    finally:
        db.close()
    assert _sql(path, "SELECT * FROM entries WHERE actor_id = 'b'") == b_before


async def test_the_highest_actor_key_of_format_5_holds_a_log(tmp_path: Path, layout: int) -> None:
    """The last key format 5 gives (2**31 - 1: rowids up to 2**63 - 1, SQLite's largest) is
    registered and holds a log read back whole; the registration after it is refused and
    nothing is written (format 4 gives keys on)."""
    path = tmp_path / "agents.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO actors (id, actor_id, actor_type, created_at) VALUES (?, 'near', 't.A', 0)",
        (2**31 - 2,),
    )
    db.commit()
    db.close()
    store = SqliteStore(path)
    await store.open()
    try:
        await store.register_actor("last", "t.A")
        rows = _ask("last", 1, "m1", "x")
        await store.append("last", 0, rows)
        assert await store.read("last") == rows
        assert await store.find_message("last", "m1") == rows[0]
        assert await store.find_ref("last", "step", 1) == rows[3:]
        if layout == 5:
            with pytest.raises(ConfigurationError, match="cannot register 1 more"):
                await store.register_actor("beyond", "t.A")
            assert await store.get_actor("beyond") is None
        else:
            await store.register_actor("beyond", "t.A")
    finally:
        await store.close()
    assert _sql(path, "SELECT actor_id, id FROM actors WHERE actor_id = 'last'") == [
        ("last", 2**31 - 1)
    ]
    if layout == 5:
        assert _sql(path, "SELECT max(id) FROM log") == [((2**31 - 1) << 32 | 4,)]
