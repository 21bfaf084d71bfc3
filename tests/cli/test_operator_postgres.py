"""Operator tools next to a live runtime on PostgreSQL (issue 18.17, 18.10).

Needs a server: set ``ACTORLOG_TEST_POSTGRES_URL`` (skips without one, except under CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import asyncpg
import pytest
from actorlog import ActorSystem, SequenceConflictError, ops
from actorlog.store import Store
from actorlog.stores import PostgresStore

from ._agents import Auditor, Biller, Job, crash_mid_call, ran

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
                async with ops.opened(pg_store.url) as store:
                    seen = set()
                    for _ in range(30):
                        report = await ops.verify(store)
                        assert report.findings == [], report.findings
                        statuses = await ops.list_actors(store)
                        assert all(a.status != "quarantined" for a in statuses), statuses
                        seen.add(report.entries)
                    assert len(seen) > 1  # it really was being written meanwhile
            finally:
                stop.set()


async def _offline_resolve_next_to_a_live_runtime(
    make: Callable[[], Store], url: str, *, write: str = "send"
) -> None:
    """An operator resolves offline while a runtime waits on that intent; the runtime's next
    write to the actor conflicts. The records must say so: one 'stopped' event naming the
    SequenceConflictError, status 'stopped' naming the offline decision; no 'quarantined'
    event, no 'stopped while in doubt'. A restart applies the decision."""
    ran.clear()
    await crash_mid_call(make())
    async with ActorSystem(make(), actors=[Biller, Auditor], shutdown_grace=0) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            (seq,) = await system.wait_in_doubt("bill-1")
        async with ops.opened(url, read_only=False) as off:
            d = await ops.resolve(off, "bill-1", seq, result="by hand", by="op")
        with pytest.raises(SequenceConflictError), anyio.fail_after(20):
            if write == "send":
                await ref.send(Job("more"), message_id="m3")
            else:  # an ask hung: it waited for a commit that never came (issue 24 item 12)
                await ref.ask(Job("more"), message_id="m3")
        await anyio.sleep(0.5)  # let the stopped step record whatever it records
    async with ops.opened(url) as ro:
        a = await ops.actor_status(ro, "bill-1")
        h = await ops.history(ro, "bill-1")
    kinds = [e.kind for e in h.events]
    assert kinds.count("stopped") == 1 and "quarantined" not in kinds, h.events
    (stopped,) = [e for e in h.events if e.kind == "stopped"]
    assert stopped.detail["error_type"] == "SequenceConflictError"
    assert a.status == "stopped"
    assert a.problem is not None and "stopped while in doubt" not in a.problem
    assert f"offline decision seq {d.seq}" in a.problem and "by op" in a.problem
    async with ActorSystem(make(), actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            assert await ref.ask(Job("hang"), message_id="m2") == "by hand"
    assert ran == ["first", "hang"]


@pytest.mark.parametrize("write", ["send", "ask"])
async def test_offline_resolve_next_to_a_live_runtime_on_postgres(
    pg_store: PostgresStore, write: str
) -> None:
    schema, dsn = pg_store.schema, pg_store.dsn
    await _offline_resolve_next_to_a_live_runtime(
        lambda: PostgresStore(dsn, schema=schema), pg_store.url, write=write
    )


async def test_nan_in_float_columns_is_named_on_postgres(pg_store: PostgresStore) -> None:
    """PostgreSQL stores NaN in a float column (SQLite turns it into NULL): --json stays
    valid JSON and names it, text output and verify name it, nothing dies."""
    import json

    from ._support import Run, cli

    async with ActorSystem(pg_store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1", snapshot_every=1)
        await ref.ask(Job("a"), message_id="m1")
    conn = await asyncpg.connect(pg_store.dsn)
    try:
        await conn.execute(f'SET search_path TO "{pg_store.schema}"')
        await conn.execute("UPDATE actors SET created_at = 'NaN'")
        await conn.execute("UPDATE snapshots SET created_at = 'Infinity'")
        await conn.execute("UPDATE events SET at = 'NaN'")
    finally:
        await conn.close()

    def refuse(name: str) -> Any:
        raise AssertionError(f"invalid JSON constant {name}")

    url = pg_store.url

    async def run(*args: str) -> Run:
        return await anyio.to_thread.run_sync(lambda: cli(*args))

    for json_args in (("actors", url, "--json"), ("history", url, "bill-1", "--json")):
        r = await run(*json_args)
        assert r.code in (0, 1), r.err
        assert [json.loads(x, parse_constant=refuse) for x in r.out.splitlines()]
        assert "not a finite number" in r.out
    for text_args in (("history", url, "bill-1"), ("verify", url)):
        r = await run(*text_args)
        assert r.code in (0, 1) and "internal error" not in r.err, r.err
    r = await run("verify", url)
    assert r.code == 1 and "created_at is not a time: nan" in r.out, r.out
