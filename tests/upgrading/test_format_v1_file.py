"""A SQLite file written in format version 1 (``fixtures/payer_format_v1.db``, made by
``make_v1_sqlite_fixture.py`` with the code from before format 2) stays readable and
resumable (FORMAT.md [F1], "Format history"): its entries verify, its snapshot is used, the
call in doubt at the SIGKILL is re-run with its recorded key, and new steps go on after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from actorlog import ActorSystem, ops
from actorlog.store import FORMAT_VERSION
from actorlog.stores import SqliteStore

from ._old_files import _clean, copy_of, format_version  # noqa: F401 (_clean: autouse)
from .agents import KEYS, Payer, Question

pytestmark = pytest.mark.anyio

RECORDED_KEY = "pay-1:d8ccc19a956b3545:5:0"  # the intent of q2, as format 1 wrote it


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    return copy_of("payer_format_v1.db", tmp_path)


async def test_a_format_1_file_verifies_as_it_was_written(old_file: Path) -> None:
    async with ops.opened(f"sqlite:///{old_file}") as store:
        report = await ops.verify(store)
    assert report.ok, report.findings
    assert (report.entries, report.snapshots) == (6, 1)
    assert format_version(old_file) == "1"  # a read-only open changes nothing


async def test_a_format_1_file_resumes_and_goes_on(old_file: Path) -> None:
    async with ActorSystem(SqliteStore(old_file), actors=[Payer]) as system:
        ref = await system.spawn(Payer, "pay-1")
        assert await ref.ask(Question("q2"), message_id="q2") == "charged q2"
        assert KEYS == [RECORDED_KEY]  # the call in doubt, re-run with its recorded key
        assert await ref.ask(Question("q1"), message_id="q1") == "charged q1"  # from the log
        assert await ref.ask(Question("q3"), message_id="q3") == "charged q3"
        assert len(KEYS) == 2 and KEYS[1].startswith("pay-1:d8ccc19a956b3545:")
    async with ActorSystem(SqliteStore(old_file), actors=[Payer]) as system:
        state = await system.read_state(Payer, "pay-1")  # replayed from the mixed log
    assert state.answers == ["charged q1", "charged q2", "charged q3"]
    assert format_version(old_file) == "2"  # written in format 2, in its own layout
    async with ops.opened(f"sqlite:///{old_file}") as store:
        report = await ops.verify(store)
    assert report.ok, report.findings


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_format_1_postgres_store_resumes_and_is_upgraded(
    old_file: Path, anyio_backend: str
) -> None:
    """The same log, copied row by row into a PostgreSQL schema marked format 1: a runtime
    resumes it (the call in doubt re-run with its recorded key) and marks it format 2."""
    import asyncpg
    from actorlog.stores import PostgresStore

    from tests import _pg

    url = _pg.postgres_url("the format-1 PostgreSQL case")
    schema = _pg.new_schema("v1")
    source = SqliteStore(old_file, read_only=True)
    await source.open()
    try:
        actor = await source.get_actor("pay-1")
        assert actor is not None
        rows = await source.read("pay-1")
        snaps = [
            await source.load_snapshot("pay-1", i.seq) for i in await source.list_snapshots("pay-1")
        ]
    finally:
        await source.close()
    try:
        target = PostgresStore(url, schema=schema)
        await target.open()
        try:
            await target.register_actor("pay-1", actor.actor_type)
            await target.append("pay-1", 0, rows)
            for snap in snaps:
                assert snap is not None
                await target.save_snapshot(snap)
        finally:
            await target.close()
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                f"UPDATE {_pg.quote_ident(schema)}.actorlog_meta SET value = '1' "
                "WHERE key = 'format_version'"
            )
        finally:
            await conn.close()
        async with ActorSystem(PostgresStore(url, schema=schema), actors=[Payer]) as system:
            ref = await system.spawn(Payer, "pay-1")
            assert await ref.ask(Question("q2"), message_id="q2") == "charged q2"
            assert KEYS == [RECORDED_KEY]
            assert await ref.ask(Question("q3"), message_id="q3") == "charged q3"
        conn = await asyncpg.connect(url)
        try:
            version = await conn.fetchval(
                f"SELECT value FROM {_pg.quote_ident(schema)}.actorlog_meta "
                "WHERE key = 'format_version'"
            )
        finally:
            await conn.close()
        assert version == str(FORMAT_VERSION)
        async with ops.opened(PostgresStore(url, schema=schema).url) as store:
            report = await ops.verify(store)
        assert report.ok, report.findings
    finally:
        await _pg.drop_schemas(url, schema)
