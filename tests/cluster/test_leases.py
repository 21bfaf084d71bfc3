"""Leases and fencing tokens in PostgresStore (store level, one real server)."""

from __future__ import annotations

from pathlib import Path

import anyio
import asyncpg
import pytest
from actorlog import LeaseLostError, SequenceConflictError
from actorlog._journal.codec import make_row
from actorlog.store import EntryRow
from actorlog.stores import MemoryStore, PostgresStore, SqliteStore
from actorlog.stores.postgres.schema import SCHEMA_VERSION

pytestmark = pytest.mark.anyio


def _row(actor_id: str, seq: int) -> EntryRow:
    return make_row(actor_id, seq, "message", "m.T", 0, f"id-{seq}", b"{}")


async def test_capability_flag_only_on_postgres(pg_store: PostgresStore, tmp_path: Path) -> None:
    assert pg_store.capabilities.leases
    assert not MemoryStore().capabilities.leases
    assert not SqliteStore(tmp_path / "a.db").capabilities.leases


async def test_acquire_is_exclusive_and_bumps_the_token(pg_store: PostgresStore) -> None:
    await pg_store.register_actor("a", "t")
    t1 = await pg_store.acquire_lease("a", "r1", 30)
    assert t1 == 1
    assert await pg_store.acquire_lease("a", "r2", 30) is None
    # The same owner may take it again (a restart): the token still moves on.
    assert await pg_store.acquire_lease("a", "r1", 30) == 2
    lease = await pg_store.get_lease("a")
    assert lease is not None and lease[0] == "r1" and lease[1] == 2 and lease[2] > 25


async def test_expired_lease_is_taken_over_and_old_token_cannot_renew(
    pg_store: PostgresStore,
) -> None:
    await pg_store.register_actor("a", "t")
    t1 = await pg_store.acquire_lease("a", "r1", 0.2)
    assert t1 is not None
    assert await pg_store.renew_lease("a", "r1", t1, 0.2)
    await anyio.sleep(0.3)
    t2 = await pg_store.acquire_lease("a", "r2", 30)
    assert t2 == t1 + 1
    assert not await pg_store.renew_lease("a", "r1", t1, 30)
    assert await pg_store.renew_leases("r2", {"a": t2}, 30) == {"a"}


async def test_release_frees_it_at_once_and_keeps_the_token_monotonic(
    pg_store: PostgresStore,
) -> None:
    await pg_store.register_actor("a", "t")
    t1 = await pg_store.acquire_lease("a", "r1", 30)
    assert t1 is not None
    await pg_store.release_lease("a", "r1", t1)
    assert await pg_store.acquire_lease("a", "r2", 30) == t1 + 1


async def test_fenced_append_with_an_old_token_is_rejected(pg_url: str, pg_schema: str) -> None:
    old = PostgresStore(pg_url, schema=pg_schema)
    new = PostgresStore(pg_url, schema=pg_schema)
    await old.open()
    await new.open()
    try:
        await old.register_actor("a", "t")
        t1 = await old.acquire_lease("a", "old", 0.1)
        assert t1 is not None
        old.set_fence("a", t1)
        await old.append("a", 0, [_row("a", 1)])
        await anyio.sleep(0.2)  # the old owner pauses past its lease
        t2 = await new.acquire_lease("a", "new", 30)
        assert t2 == t1 + 1
        new.set_fence("a", t2)
        # The zombie's write is rejected by the database, even at the right seq.
        with pytest.raises(LeaseLostError) as info:
            await old.append("a", 1, [_row("a", 2)])
        assert isinstance(info.value, SequenceConflictError)
        assert info.value.token == t1 and info.value.current == t2
        await new.append("a", 1, [_row("a", 2)])
        assert [r.seq for r in await new.read("a")] == [1, 2]
        # An explicit keyword token wins over the registered one.
        with pytest.raises(LeaseLostError):
            await new.append("a", 2, [_row("a", 3)], fence=t1)
        # Unfenced appends (no lease in use) still work: conditional append only.
        new.set_fence("a", None)
        await new.append("a", 2, [_row("a", 3)])
    finally:
        await old.close()
        await new.close()


async def test_fenced_and_valid_appends_share_a_batch(pg_store: PostgresStore) -> None:
    for a in ("a", "b"):
        await pg_store.register_actor(a, "t")
    ta = await pg_store.acquire_lease("a", "r1", 30)
    assert ta is not None
    await pg_store.acquire_lease("b", "r1", 30)
    results: dict[str, BaseException | None] = {}

    async def one(actor: str, fence: int) -> None:
        try:
            await pg_store.append(actor, 0, [_row(actor, 1)], fence=fence)
            results[actor] = None
        except BaseException as exc:
            results[actor] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "a", ta)
        tg.start_soon(one, "b", 0)  # stale
    assert results["a"] is None
    assert isinstance(results["b"], LeaseLostError)
    assert await pg_store.read("b") == []


async def test_racing_acquires_one_winner(pg_url: str, pg_schema: str) -> None:
    stores = [PostgresStore(pg_url, schema=pg_schema) for _ in range(5)]
    for s in stores:
        await s.open()
    try:
        await stores[0].register_actor("a", "t")
        got: list[int | None] = []

        async def take(i: int) -> None:
            got.append(await stores[i].acquire_lease("a", f"r{i}", 30))

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(take, i)
        assert sorted(got, key=lambda t: t or 0) == [None, None, None, None, 1]
    finally:
        for s in stores:
            await s.close()


async def test_orphans_and_inbox(pg_store: PostgresStore) -> None:
    await pg_store.register_actor("busy", "t")
    await pg_store.register_actor("idle", "t")
    await pg_store.append("busy", 0, [_row("busy", 1)])
    assert await pg_store.orphans() == [("busy", "t")]
    t = await pg_store.acquire_lease("busy", "r1", 30)
    assert t is not None
    assert await pg_store.orphans() == []
    woken: list[str] = []
    stop = await pg_store.listen_inbox(woken.append)
    try:
        await pg_store.inbox_put("busy", "m1", "m.T", "{}", None)
        await pg_store.inbox_put("busy", "m1", "m.T", "{}", None)  # once per id
        await pg_store.inbox_put("idle", "m2", "m.T", "{}", "x")
        with anyio.fail_after(5):
            while len(woken) < 2:
                await anyio.sleep(0.01)
    finally:
        await stop()
    assert [m[:2] for m in await pg_store.inbox_for("r1")] == [("busy", "m1")]
    assert ("idle", "t") in await pg_store.orphans()
    await pg_store.inbox_delete("busy", "m1")
    assert await pg_store.inbox_for("r1") == []


async def test_format_1_store_migrates_to_leases(pg_url: str, pg_schema: str) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        store = PostgresStore(pg_url, schema=pg_schema)
        await store.open()
        await store.register_actor("a", "t")
        await store.append("a", 0, [_row("a", 1)])
        await store.close()
        # Turn it back into a schema-version-1 store, as written before leases existed.
        await conn.execute(f'SET search_path = "{pg_schema}"')
        await conn.execute("DROP TABLE leases, inbox")
        await conn.execute("ALTER TABLE entries DROP COLUMN fence")
        await conn.execute("DELETE FROM actorlog_meta WHERE key = 'schema_version'")
    finally:
        await conn.close()
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()
    try:
        t = await store.acquire_lease("a", "r", 30)
        assert t == 1
        await store.append("a", 1, [_row("a", 2)], fence=t)
        assert [r.seq for r in await store.read("a")] == [1, 2]
        # schema version 3: the ref index covers step rows only
        conn = await asyncpg.connect(pg_url)
        try:
            indexes = {
                r["indexname"]
                for r in await conn.fetch(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = $1", pg_schema
                )
            }
            version = await conn.fetchval(
                f"SELECT value FROM \"{pg_schema}\".actorlog_meta WHERE key = 'schema_version'"
            )
        finally:
            await conn.close()
        assert "entries_step" in indexes and "entries_ref" not in indexes
        assert version == str(SCHEMA_VERSION)
    finally:
        await store.close()
