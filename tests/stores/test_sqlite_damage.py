"""SQLite damage the log's own checks cannot see: storage classes, the summary row, the file.

A bit flipped in a record header turns a BLOB column into TEXT or an INTEGER into a REAL
without changing the record's length; SQLite then hands back a ``str`` where the store
expects ``bytes``. Every column a store reads is type-checked (DESIGN.md section 10, "Damage
is named"): a wrong type is a ``CorruptEntryError`` naming actor, seq and check for entries,
a marked row for listings (the other actors are still listed and verified), never an
internal ``TypeError``.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from actorlog import (
    ActorQuarantinedError,
    ActorSystem,
    ConfigurationError,
    CorruptEntryError,
    StoreClosedError,
    StoreCorruptError,
    ops,
)
from actorlog.store import SnapshotInfo
from actorlog.stores import SqliteStore

from tests._sqlitefile import SqliteFile, flip
from tests.torture.helpers import Add, Counter, Get

pytestmark = pytest.mark.anyio

ENTRY_COLUMNS = ("actor_id", "seq", "kind", "type_tag", "ref", "message_id", "payload", "checksum")


async def build(path: Path) -> None:
    """Two actors with three handled messages each, a snapshot after step 2: the third
    message and its step lie after it, where recovery reads."""
    async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
        for aid in ("bystander", "victim"):
            ref = await system.spawn(Counter, aid, snapshot_every=2)
            for n in range(1, 4):
                await ref.ask(Add(n), message_id=f"{aid}-{n}")
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def sql(path: Path, statement: str, *params: object) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(statement, params)
    finally:
        db.close()


def flip_serial_type(path: Path, table: str, column: int, where: int = 0) -> None:
    """Flip the low bit of one column's serial type in the ``where``-th record of ``table``
    whose type allows it without changing the record's length (BLOB<->TEXT, INT64<->REAL)."""
    candidates = [
        r
        for r in SqliteFile.read(path).records(table)
        if r.types[column] >= 12 or r.types[column] in (6, 7)
    ]
    flip(path, candidates[where].type_offsets[column], 0)


async def recover_victim(path: Path) -> object:
    """The victim's state, or the ``__cause__`` of its quarantine; the bystander is fine."""
    async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
        other = await system.spawn(Counter, "bystander")
        assert (await other.ask(Get()))["seen"] == [1, 2, 3]
        try:
            ref = await system.spawn(Counter, "victim")
            return await ref.ask(Get())
        except ActorQuarantinedError as exc:
            return exc.__cause__
        except CorruptEntryError as exc:  # its summary row: spawn itself names the damage
            return exc


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actorlog.cli._main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("column", ["payload", "kind", "type_tag", "message_id"])
async def test_a_flipped_storage_class_in_an_entry_is_a_named_corrupt_entry(
    tmp_path: Path, column: str
) -> None:
    """A record header bit flip (BLOB<->TEXT): recovery names actor, seq and check; verify
    and the CLI list report the actor as damaged and go on with the others."""
    path = tmp_path / "agents.db"
    await build(path)
    db = sqlite3.connect(path)
    (seq,) = db.execute(
        "SELECT max(seq) FROM entries WHERE actor_id='victim' AND message_id IS NOT NULL"
    ).fetchone()
    db.close()
    index = ENTRY_COLUMNS.index(column)
    (record,) = [r for r in SqliteFile.read(path).records("entries") if r.key == ("victim", seq)]
    flip(path, record.type_offsets[index], 0)

    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        with pytest.raises(CorruptEntryError) as info:
            await store.read("victim")
        assert (info.value.actor_id, info.value.seq, info.value.check) == (
            "victim",
            seq,
            "column type",
        )
        assert column in info.value.detail
        report = await ops.verify(store)
        found = {(f.actor_id, f.seq, f.check) for f in report.findings}
        assert ("victim", seq, "column type") in found
        # and SQLite's integrity check of the file (actor ""), whose index on message_id
        # may disagree with a flipped column
        assert {f[0] for f in found} - {""} == {"victim"}
        assert all(f[2] == "integrity" for f in found if f[0] == "")
        # the rows before it were checked (no false findings there), and those after it read
        assert not {f for f in found if 0 < f[1] < seq}, found
        assert report.entries == 2 * 21 - 1
        listed = {a.actor_id: a.status for a in await ops.list_actors(store)}
        assert listed == {"bystander": "idle", "victim": "quarantined"}
    finally:
        await store.close()

    cause = await recover_victim(path)
    assert isinstance(cause, CorruptEntryError), cause
    assert (cause.actor_id, cause.seq, cause.check) == ("victim", seq, "column type")

    url = f"sqlite:///{path}"
    for command in ("actors", "verify"):
        done = cli(command, url)
        assert "internal error" not in done.stderr, done.stderr
        assert "victim" in done.stdout + done.stderr
        if command == "actors":
            assert "bystander" in done.stdout


async def test_an_integer_stored_as_real_is_a_named_corrupt_entry(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    await build(path)
    sql(path, "UPDATE entries SET ref = ref + 0.5 WHERE actor_id='victim' AND seq=2")
    sql(path, "UPDATE entries SET checksum = checksum + 0.5 WHERE actor_id='victim' AND seq=3")
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        with pytest.raises(CorruptEntryError) as info:
            await store.read("victim")
        assert (info.value.seq, info.value.check) == (2, "column type")
        assert "entries.ref holds float, not int" in str(info.value)
        with pytest.raises(CorruptEntryError) as info:
            await store.read("victim", after_seq=2)
        assert (info.value.seq, info.value.check) == (3, "column type")
    finally:
        await store.close()


async def test_a_damaged_actor_row_is_listed_as_damaged_and_the_others_still_are(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents.db"
    await build(path)
    sql(path, "UPDATE actors SET last_seq = CAST(last_seq AS TEXT) || 'x' WHERE actor_id='victim'")
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        with pytest.raises(CorruptEntryError) as info:
            await store.get_actor("victim")
        assert info.value.actor_id == "victim" and "actors.last_seq holds str" in str(info.value)
        rows = {a.actor_id: a for a in await store.list_actors()}
        assert rows["bystander"].damage is None
        assert rows["victim"].damage is not None and "last_seq" in rows["victim"].damage
        # the start's one query finds it too (whether it has work is unknown), not the other
        unfinished = await store.unfinished_actors()
        assert [(a.actor_id, a.damage) for a in unfinished] == [("victim", rows["victim"].damage)]
        listed = {a.actor_id: a.status for a in await ops.list_actors(store)}
        assert listed == {"bystander": "idle", "victim": "quarantined"}
        report = await ops.verify(store)
        assert {f.actor_id for f in report.findings} == {"victim"}
    finally:
        await store.close()
    cause = await recover_victim(path)
    assert isinstance(cause, CorruptEntryError) and cause.actor_id == "victim", cause


async def test_a_damaged_snapshot_row_is_marked_and_fails_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    await build(path)
    sql(path, "UPDATE snapshots SET digest = CAST(digest AS TEXT) WHERE actor_id='victim'")
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        (info,) = await store.list_snapshots("victim")
        assert isinstance(info, SnapshotInfo)
        assert info.damage is not None and "snapshots.digest holds" in info.damage
        snap = await store.load_snapshot("victim", info.seq)
        assert snap is not None and snap.info.damage is not None
    finally:
        await store.close()
    state = await recover_victim(path)  # the log still holds everything: no snapshot needed
    assert isinstance(state, dict) and state["seen"] == [1, 2, 3], state


async def test_text_that_is_not_utf8_is_a_named_corrupt_entry(tmp_path: Path) -> None:
    """sqlite3 would raise OperationalError("Could not decode to UTF-8"): an unavailable
    store, for what is damage to one entry."""
    path = tmp_path / "agents.db"
    await build(path)
    sql(
        path,
        "UPDATE entries SET type_tag = CAST(X'FFFE' AS TEXT) WHERE actor_id='victim' AND seq="
        "(SELECT max(seq) FROM entries WHERE actor_id='victim' AND kind='message')",
    )
    cause = await recover_victim(path)
    assert isinstance(cause, CorruptEntryError), cause
    assert cause.check == "column type" and "type_tag holds UndecodableText" in cause.detail


async def test_a_foreign_text_encoding_in_the_file_header_is_store_corruption(
    tmp_path: Path,
) -> None:
    """Byte 56 of the header says UTF-16be: every text would read as garbage, the actors
    would look absent, and a spawn would start them afresh (a wrong state)."""
    path = tmp_path / "agents.db"
    await build(path)
    flip(path, 59, 1)  # encoding 1 (UTF-8) -> 3 (UTF-16be)
    with pytest.raises(StoreCorruptError) as info:
        await recover_victim(path)
    assert str(path) in str(info.value)


async def test_a_malformed_file_is_store_corruption_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    await build(path)
    sf = SqliteFile.read(path)
    page = sf.pages_of("entries")[0]
    offset = (page - 1) * sf.page_size + (100 if page == 1 else 0)
    flip(path, offset, 4)  # the b-tree page type: no valid page type
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        with pytest.raises(StoreCorruptError) as info:
            await store.read("victim")
        assert str(path) in str(info.value)
    finally:
        await store.close()


async def test_a_damaged_last_seq_is_damage_not_another_runtime(tmp_path: Path) -> None:
    """The append trigger checks ``actors.last_seq``; if it disagrees with the log, the
    append is refused as damage naming the column, not blamed on "another runtime"."""
    path = tmp_path / "agents.db"
    await build(path)
    sql(path, "UPDATE actors SET last_seq = last_seq + 5 WHERE actor_id='victim'")
    store = SqliteStore(path)
    await store.open()
    try:
        (last,) = (await store.read("victim"))[-1:]
        from actorlog._journal.codec import make_row

        row = make_row("victim", last.seq + 1, "message", "t", 0, "new", b"{}")
        with pytest.raises(CorruptEntryError) as info:
            await store.append("victim", last.seq, [row])
        assert info.value.actor_id == "victim" and "actors.last_seq" in str(info.value)
        assert "another runtime" not in str(info.value)
    finally:
        await store.close()


async def test_a_value_sqlite_cannot_take_is_not_a_closed_store(tmp_path: Path) -> None:
    """A lone surrogate (or an integer beyond 64 bits) is bad input, not StoreClosedError;
    and in a group commit it fails only its own append."""
    store = SqliteStore(tmp_path / "agents.db")
    await store.open()
    try:
        with pytest.raises(ConfigurationError) as info:
            await store.get_actor("bad\udc80id")
        assert not isinstance(info.value, StoreClosedError)
        with pytest.raises(ConfigurationError):
            await store.find_message("a", "m\udc80")
        with pytest.raises(ConfigurationError):
            await store.read("a", after_seq=2**70)
        from actorlog._journal.codec import make_row

        await store.register_actor("a", "t")
        await store.register_actor("b", "t")
        good = make_row("a", 1, "message", "t", 0, "ok", b"{}")
        bad = make_row("b", 1, "message", "t", 0, "ok", b"{}")
        bad = type(bad)(bad.actor_id, 1, "message", "t", 0, "m\udc80", b"{}", bad.checksum)
        results: dict[str, object] = {}

        async def put(actor: str, row: object) -> None:
            try:
                await store.append(actor, 0, [row])  # type: ignore[list-item]  # an EntryRow
                results[actor] = "ok"
            except Exception as exc:
                results[actor] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(put, "a", good)
            tg.start_soon(put, "b", bad)
        assert results["a"] == "ok"
        assert isinstance(results["b"], ConfigurationError), results
    finally:
        await store.close()
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.read("a")


async def test_verify_says_what_it_cannot_see_in_a_sqlite_store(tmp_path: Path) -> None:
    """Damage to SQLite's -wal file drops committed transactions below what the log can see
    (issue 11.9): verify cannot find it, and says so instead of a bare "no damage found"."""
    path = tmp_path / "agents.db"
    await build(path)
    done = cli("verify", f"sqlite:///{path}")
    assert done.returncode == 0, done.stderr
    assert "note:" in done.stdout and "-wal" in done.stdout and "VACUUM INTO" in done.stdout
    done = cli("verify", "--json", f"sqlite:///{path}")
    assert "-wal" in done.stdout and '"limits"' in done.stdout


async def test_damaged_schema_text_is_store_corruption(tmp_path: Path) -> None:
    """A flipped high bit in sqlite_master's SQL text: SQLite's error message quotes the
    damaged text, which is not UTF-8 (found by the file-damage torture test: "internal
    error: UnicodeDecodeError")."""
    path = tmp_path / "agents.db"
    await build(path)
    data = path.read_bytes()
    at = data.index(b"CREATE TRIGGER log_contiguous") + len(b"CRE")
    flip(path, at, 7)  # CREATE -> CRE\xc1TE: a syntax error quoting invalid UTF-8
    done = cli("verify", f"sqlite:///{path}")
    assert "internal error" not in done.stderr, done.stderr
    with pytest.raises(StoreCorruptError) as info:
        await recover_victim(path)
    assert str(path) in str(info.value)


async def test_a_damaged_name_in_the_stored_schema_is_store_corruption(tmp_path: Path) -> None:
    """A flipped bit turns ``handled_seq`` into ``handled_sgq`` in the append trigger's
    stored SQL: every append fails with "no such column" -- not a transient failure (found
    by the file-damage torture test, seed 416065)."""
    path = tmp_path / "agents.db"
    await build(path)
    data = path.read_bytes()
    trigger = data.index(b"CREATE TRIGGER log_summary")
    at = data.index(b"handled_seq", trigger) + len(b"handled_s")
    flip(path, at, 1)  # 'e' (0x65) -> 'g' (0x67)
    with pytest.raises(StoreCorruptError) as info:
        async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
            ref = await system.spawn(Counter, "victim")
            try:
                await ref.ask(Add(9))
            except ActorQuarantinedError as exc:
                assert exc.__cause__ is not None
                raise exc.__cause__ from None
    assert str(path) in str(info.value) and "handled_sgq" in str(info.value)


async def test_an_actor_whose_summary_row_is_damaged_is_quarantined_at_start(
    tmp_path: Path,
) -> None:
    """Whether it has unfinished work is unknown: it is not silently skipped by the start-up
    recovery but shown quarantined with the damage named, and the others run."""
    path = tmp_path / "agents.db"
    await build(path)
    sql(path, "UPDATE actors SET handled_seq = 'x' WHERE actor_id='victim'")
    async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
        assert system.status("victim") == "quarantined"
        err = system.error("victim")
        assert isinstance(err, CorruptEntryError) and err.actor_id == "victim", err
        assert "handled_seq" in str(err)
        assert system.status("bystander") != "quarantined"


def stale_message_id_index(path: Path, actor_id: str, old: str, new: str) -> None:
    """Rename a message id in the log (``entries``, format 3's ``log``) behind the back of
    its unique index ``log_message_id``: the index still holds ``old`` (damage SQLite's own
    integrity check reports, the rows do not show)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA writable_schema=ON")
        (index,) = db.execute(
            "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master "
            "WHERE name = 'log_message_id'"
        ).fetchall()
        db.execute("DELETE FROM sqlite_master WHERE name = 'log_message_id'")
    finally:
        db.close()
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(
            "UPDATE entries SET message_id = ? WHERE actor_id = ? AND message_id = ?",
            (new, actor_id, old),
        )
    finally:
        db.close()
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA writable_schema=ON")
        db.execute("INSERT INTO sqlite_master VALUES (?, ?, ?, ?, ?)", index)
    finally:
        db.close()


async def test_an_append_refused_by_a_damaged_message_id_index_is_store_corruption(
    tmp_path: Path,
) -> None:
    """The index refuses a message id no row holds: the append fails although the log ends
    where the caller expects. That is no conflict ("expected last seq 6, found 6"): it is
    ``StoreCorruptError`` naming the file; nothing is written."""
    path = tmp_path / "agents.db"
    await build(path)
    stale_message_id_index(path, "victim", "victim-1", "renamed-1")
    store = SqliteStore(path)
    await store.open()
    try:
        before = await store.read("victim")
        from actorlog._journal.codec import make_row

        row = make_row("victim", before[-1].seq + 1, "message", "t", 0, "victim-1", b"{}")
        with pytest.raises(StoreCorruptError) as info:
            await store.append("victim", before[-1].seq, [row])
        assert info.value.path == str(path) and "message_id" in str(info.value)
        assert "another runtime" not in str(info.value)
        assert await store.read("victim") == before
    finally:
        await store.close()
