"""The console script over a PostgreSQL store URL (``postgresql://...``).

Needs a server: set ``ACTORLOG_TEST_POSTGRES_URL`` or ``DATABASE_URL`` (locally:
``source .ci/pg.sh; pg_start``). Without one it skips, except under CI, where it fails.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import anyio
import asyncpg
import pytest
from actorlog import ActorSystem
from actorlog.stores import PostgresStore

from ._agents import Auditor, Biller, Job, crash_mid_call, ran
from ._support import Run, cli

pytestmark = pytest.mark.anyio


@pytest.fixture
async def pg_store() -> AsyncIterator[PostgresStore]:
    url = os.environ.get("ACTORLOG_TEST_POSTGRES_URL") or os.environ.get("DATABASE_URL")
    if not url:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail("CI must test the CLI over PostgreSQL: set ACTORLOG_TEST_POSTGRES_URL")
        pytest.skip("no PostgreSQL server (source .ci/pg.sh; pg_start)")
    schema = f"actorlog_cli_{uuid.uuid4().hex[:12]}"
    yield PostgresStore(url, schema=schema, max_size=2)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def _cli(*args: str) -> Run:
    return await anyio.to_thread.run_sync(lambda: cli(*args))


async def test_cli_over_postgres(pg_store: PostgresStore) -> None:
    ran.clear()
    await crash_mid_call(pg_store)
    url = pg_store.url  # reopens the same schema

    (a,) = (await _cli("actors", url, "--json")).json_lines()
    assert a["status"] == "in_doubt"
    intent = a["in_doubt"][0]["intent_seq"]
    assert (await _cli("verify", url)).code == 0
    r = await _cli("resolve", url, "bill-1", str(intent), "--result", '"charged hang"')
    assert r.code == 0, r.err
    lines = (await _cli("history", url, "bill-1", "--json")).json_lines()
    assert [x["status"] for x in lines if x["type"] == "step"] == ["ok", "running"]

    async with ActorSystem(pg_store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(10):
            assert await ref.ask(Job("hang"), message_id="m2") == "charged hang"
    assert ran == ["first", "hang"]
    (a,) = (await _cli("actors", url, "--json")).json_lines()
    assert a["status"] == "idle"
    r = await _cli("fork", url, "bill-1", "--at", "1", "--as", "bill-1-fork", "--yes")
    assert r.code == 0, r.err
    assert (await _cli("verify", url, "--json")).json_lines()[0]["ok"] is True
