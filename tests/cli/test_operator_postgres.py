"""Operator tools next to a live runtime on PostgreSQL (issue 18.17, 18.10).

Needs a server: set ``ACTORLOG_TEST_POSTGRES_URL`` (skips without one, except under CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import anyio
import asyncpg
import pytest
from actorlog import ActorSystem, inspect
from actorlog.stores import PostgresStore

from ._agents import Auditor, Biller, Job, ran

pytestmark = pytest.mark.anyio


@pytest.fixture
async def pg_store() -> AsyncIterator[PostgresStore]:
    url = os.environ.get("ACTORLOG_TEST_POSTGRES_URL") or os.environ.get("DATABASE_URL")
    if not url:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail("CI must test the CLI over PostgreSQL: set ACTORLOG_TEST_POSTGRES_URL")
        pytest.skip("no PostgreSQL server (source .ci/pg.sh; pg_start)")
    schema = f"actorlog_ops_{uuid.uuid4().hex[:12]}"
    yield PostgresStore(url, schema=schema, max_size=4)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def test_verify_reports_no_damage_while_a_runtime_writes(pg_store: PostgresStore) -> None:
    ran.clear()
    async with ActorSystem(pg_store, actors=[Biller, Auditor]) as system:
        refs = [
            await system.spawn(Biller, f"w-{i}", snapshot_every=2, snapshot_keep=2)
            for i in range(3)
        ]
        stop = anyio.Event()

        async def write(ref: object) -> None:
            n = 0
            while not stop.is_set():
                await ref.ask(Job(f"j{n}"))  # type: ignore[attr-defined]  # an ActorRef
                n += 1

        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(write, ref)
            try:
                async with inspect.opened(pg_store.url) as store:
                    seen = set()
                    for _ in range(30):
                        report = await inspect.verify(store)
                        assert report.findings == [], report.findings
                        statuses = await inspect.list_actors(store)
                        assert all(a.status != "quarantined" for a in statuses), statuses
                        seen.add(report.entries)
                    assert len(seen) > 1  # it really was being written meanwhile
            finally:
                stop.set()
