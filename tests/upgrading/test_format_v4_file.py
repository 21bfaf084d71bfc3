"""A SQLite file written in format version 4 (``fixtures/payer_format_v4.db``, made by
``make_v4_sqlite_fixture.py`` with the code of format 4: the intents and steps packed,
FORMAT.md [F21])
stays readable, verifiable, exportable and resumable (FORMAT.md [F1], "Format history"):
its entries verify, its snapshot is used, the call in doubt at the SIGKILL is re-run with its
recorded key, and new steps go on after it in the file's own layout."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from actorlog import ActorSystem, ops
from actorlog.stores import SqliteStore

from ._old_files import _clean, copy_of, format_version  # noqa: F401 (_clean: autouse)
from .agents import KEYS, Payer, Question

pytestmark = pytest.mark.anyio

RECORDED_KEY = "pay-1:d36b3548844b78c9:5:0"  # the intent of q2 (stored packed: derived)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    return copy_of("payer_format_v4.db", tmp_path)


async def test_a_format_4_file_verifies_and_exports_as_it_was_written(old_file: Path) -> None:
    async with ops.opened(f"sqlite:///{old_file}") as store:
        report = await ops.verify(store)
        lines = [e async for e in ops.export(store, "pay-1")]
    assert report.ok, report.findings
    assert (report.entries, report.snapshots) == (6, 1)
    entries = [e for e in lines if e["type"] == "entry"]
    assert [e["kind"] for e in entries][-2:] == ["message", "intent"]
    assert all(e["valid"] for e in entries)
    assert entries[-1]["payload"][4] == RECORDED_KEY
    assert format_version(old_file) == "4"  # a read-only open changes nothing
    store = SqliteStore(old_file, read_only=True)
    await store.open()
    try:
        assert store.layout == 4
    finally:
        await store.close()


async def test_a_format_4_file_resumes_and_goes_on(old_file: Path) -> None:
    async with ActorSystem(SqliteStore(old_file), actors=[Payer]) as system:
        ref = await system.spawn(Payer, "pay-1")
        assert await ref.ask(Question("q2"), message_id="q2") == "charged q2"
        assert KEYS == [RECORDED_KEY]  # the call in doubt, re-run with its recorded key
        assert await ref.ask(Question("q1"), message_id="q1") == "charged q1"  # from the log
        assert await ref.ask(Question("q3"), message_id="q3") == "charged q3"
        assert len(KEYS) == 2 and KEYS[1].startswith("pay-1:d36b3548844b78c9:")
    async with ActorSystem(SqliteStore(old_file), actors=[Payer]) as system:
        state = await system.read_state(Payer, "pay-1")  # replayed from the file
    assert state.answers == ["charged q1", "charged q2", "charged q3"]
    assert format_version(old_file) == "4"
    con = sqlite3.connect(old_file)
    try:
        firsts = [p[:1] for (p,) in con.execute("SELECT payload FROM log ORDER BY seq")]
    finally:
        con.close()
    assert firsts[:6] == [b"[", b"\x03", b"[", b"\x05", b"[", b"\x03"]  # as recorded
    async with ops.opened(f"sqlite:///{old_file}") as store:
        report = await ops.verify(store)
    assert report.ok, report.findings
    assert report.entries > 6
