"""SQLite files written in format versions 2 to 5 (``fixtures/payer_format_v{2,3,4,5}.db``,
made by ``make_v{2,3,4,5}_sqlite_fixture.py`` with the code of that format: q1 under a
snapshot, q2's write in doubt at a SIGKILL) stay readable, verifiable, exportable and
resumable (FORMAT.md [F1], "Format history"): their entries verify, the snapshot is used,
the call in doubt is re-run with its recorded key, and new steps go on after it in the
file's own layout and format (nothing is migrated).

- format 2: ``entries`` with text columns;
- format 3: the log in ``log`` (integer actor key, kind and tag codes), payloads as written;
- format 4: format 3's tables with the intents and steps packed ([F21]);
- format 5: ``log`` a rowid table keyed ``actor << 32 | seq``, packed as format 4 ([F24])."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from actorlog import ActorSystem, ops
from actorlog.stores import SqliteStore

from ._old_files import _clean, copy_of, format_version  # noqa: F401 (_clean: autouse)
from .agents import KEYS, Payer, Question

pytestmark = pytest.mark.anyio


def _text_columns(con: sqlite3.Connection) -> None:
    tables = dict(con.execute("SELECT name, type FROM sqlite_master").fetchall())
    assert tables["entries"] == "table" and "log" not in tables and "tags" not in tables


def _payloads_as_written(con: sqlite3.Connection) -> None:
    tables = dict(con.execute("SELECT name, type FROM sqlite_master").fetchall())
    firsts = {p[:1] for (p,) in con.execute("SELECT payload FROM log")}
    assert tables["log"] == "table" and tables["entries"] == "view"
    assert firsts <= {b"[", b"{"}  # no packed payload written into a format-3 file


def _packed(con: sqlite3.Connection) -> None:
    firsts = [p[:1] for (p,) in con.execute("SELECT payload FROM log ORDER BY seq")]
    assert firsts[:6] == [b"[", b"\x03", b"[", b"\x05", b"[", b"\x03"]  # as recorded


def _packed_by_rowid(con: sqlite3.Connection) -> None:
    (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'log'").fetchone()
    assert "WITHOUT ROWID" not in sql  # format 5's rowid table ([F24])
    firsts = [p[:1] for (p,) in con.execute("SELECT payload FROM log ORDER BY id")]
    assert firsts[:6] == [b"[", b"\x03", b"[", b"\x05", b"[", b"\x03"]  # as recorded


@attrs.frozen
class OldFile:
    version: int
    incarnation: str  # of pay-1's log: q2's recorded key is pay-1:<it>:5:0
    layout: int  # SqliteStore.layout of such a file
    tables: Callable[[sqlite3.Connection], None]  # what its tables hold after new steps


FILES = {
    2: OldFile(2, "78f58eb4477f6b71", 2, _text_columns),
    3: OldFile(3, "a533142f1f05e759", 3, _payloads_as_written),
    4: OldFile(4, "d36b3548844b78c9", 4, _packed),
    5: OldFile(5, "1eb6195b4b0dc6c3", 5, _packed_by_rowid),
}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=sorted(FILES), ids=lambda v: f"format{v}")
def old(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[OldFile, Path]:
    spec = FILES[request.param]
    return spec, copy_of(f"payer_format_v{spec.version}.db", tmp_path)


async def test_an_old_file_verifies_and_exports_as_it_was_written(
    old: tuple[OldFile, Path],
) -> None:
    spec, path = old
    async with ops.opened(f"sqlite:///{path}") as store:
        report = await ops.verify(store)
        lines = [e async for e in ops.export(store, "pay-1")]
    assert report.ok, report.findings
    assert (report.entries, report.snapshots) == (6, 1)
    entries = [e for e in lines if e["type"] == "entry"]
    assert [e["kind"] for e in entries][-2:] == ["message", "intent"]
    assert all(e["valid"] for e in entries)
    assert entries[-1]["payload"][4] == f"pay-1:{spec.incarnation}:5:0"  # format 4: derived
    assert format_version(path) == str(spec.version)  # a read-only open changes nothing
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        assert store.layout == spec.layout
    finally:
        await store.close()


async def test_an_old_file_resumes_and_goes_on(old: tuple[OldFile, Path]) -> None:
    spec, path = old
    recorded_key = f"pay-1:{spec.incarnation}:5:0"  # the intent of q2, as the file holds it
    async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
        ref = await system.spawn(Payer, "pay-1")
        assert await ref.ask(Question("q2"), message_id="q2") == "charged q2"
        assert [recorded_key] == KEYS  # the call in doubt, re-run with its recorded key
        assert await ref.ask(Question("q1"), message_id="q1") == "charged q1"  # from the log
        assert await ref.ask(Question("q3"), message_id="q3") == "charged q3"
        assert len(KEYS) == 2 and KEYS[1].startswith(f"pay-1:{spec.incarnation}:")
    async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
        state = await system.read_state(Payer, "pay-1")  # replayed from the file
    assert state.answers == ["charged q1", "charged q2", "charged q3"]
    assert format_version(path) == str(spec.version)  # its layout and format: no migration
    con = sqlite3.connect(path)
    try:
        spec.tables(con)
    finally:
        con.close()
    async with ops.opened(f"sqlite:///{path}") as store:
        report = await ops.verify(store)
    assert report.ok, report.findings
    assert report.entries > 6
