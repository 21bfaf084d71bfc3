"""Spawning a new actor (docs/recovery.md "A new actor"): when the store's registration
inserted the actor's row (``ActorRow.created``), the store holds nothing of it, and the cell
starts without recovery's reads (saved options, snapshots, the log, its message ids). An
actor whose row existed before is recovered as always, even with an empty log.

The store is wrapped in ``GatedStore``, which counts the calls that reach the real store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

from tests import _pg
from tests.runtime._gated import GatedStore

pytestmark = pytest.mark.anyio

#: the reads recovery makes of an actor the store already knows
RECOVERY_READS = ("read_events", "list_snapshots", "load_snapshot", "read")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]  # pytest params are untyped


@attrs.define
class Add:
    n: int


@attrs.define
class Total:
    total: int = 0


class Adder(Actor[Total]):
    name = "spawn_new.adder"

    async def receive(self, ctx: Context, msg: Add) -> int:
        self.state.total += msg.n
        return self.state.total


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_a_new_actor_starts_without_recovery_reads(tmp_path: Path, kind: str) -> None:
    first: Store = SqliteStore(tmp_path / "a.db") if kind == "sqlite" else MemoryStore()
    store = GatedStore(first)
    async with ActorSystem(store, actors=[Adder]) as system:
        ref = await system.spawn(Adder, "new")
        assert await ref.ask(Add(2), message_id="m1") == 2
        # the retry of an id written by this new actor is still answered from its log
        assert await ref.ask(Add(2), message_id="m1") == 2
        assert await ref.ask(Add(3), message_id="m2") == 5
        cell = system._cells["new"]
        assert cell.last_recovery is not None and cell.last_recovery.entries_read == 0
    for name in (*RECOVERY_READS, "message_ids"):
        assert store.calls[name] == 0, name
    assert store.calls["get_actor"] == 0 and store.calls["register_actor"] == 1
    assert store.calls["find_message"] <= 1  # the retried id (a filter hit)
    # what it wrote is recovered in a new system as before
    again = SqliteStore(tmp_path / "a.db") if kind == "sqlite" else first
    async with ActorSystem(again, actors=[Adder]) as system:
        ref = await system.spawn(Adder, "new")
        assert await ref.ask(Add(2), message_id="m1") == 2  # the recorded reply
        assert await ref.ask(Add(1), message_id="m3") == 6


async def _registers_and_says_when_it_inserted(store: Store) -> None:
    """``register_actor`` sets ``created`` only on the call that inserted the row, also
    among concurrent registrations of one new id."""
    await store.open()
    try:
        row = await store.register_actor("a", "t")
        assert row.created and row.last_seq == 0 and row.first_seq == 0
        assert (await store.get_actor("a")) == row  # the same row as stored
        again = await store.register_actor("a", "other")
        assert not again.created and again.actor_type == "t"
        assert again.created_at == row.created_at
        # concurrent registrations of one new id: exactly one of them inserted it
        rows: list[bool] = []

        async def register(actor_type: str) -> None:
            rows.append((await store.register_actor("b", actor_type)).created)

        async with anyio.create_task_group() as tg:
            for actor_type in ("t1", "t2", "t3"):
                tg.start_soon(register, actor_type)
        assert sorted(rows) == [False, False, True]
        b = await store.get_actor("b")
        assert b is not None and b.actor_type in ("t1", "t2", "t3")
    finally:
        await store.close()


async def test_register_actor_says_when_it_inserted_the_row(tmp_path: Path) -> None:
    await _registers_and_says_when_it_inserted(SqliteStore(tmp_path / "a.db"))


async def test_memory_register_actor_says_when_it_inserted_the_row() -> None:
    await _registers_and_says_when_it_inserted(MemoryStore())


async def test_memory_register_actor_after_other_writes_is_not_created() -> None:
    """An actor a MemoryStore holds anything of (an event recorded before its registration)
    is not ``created``: recovery must read what is there."""
    store = MemoryStore()
    await store.open()
    await store.record_event("early", "note", "{}")
    assert not (await store.register_actor("early", "t")).created


async def test_an_empty_log_registered_before_is_recovered(tmp_path: Path) -> None:
    """Options saved by an earlier spawn of an actor that never got a message are still
    read: only the registration that inserted the row skips the reads."""
    async with ActorSystem(SqliteStore(tmp_path / "a.db"), actors=[Adder]) as system:
        await system.spawn(Adder, "quiet", snapshot_every=3)
    store = GatedStore(SqliteStore(tmp_path / "a.db"))
    async with ActorSystem(store, actors=[Adder]) as system:
        ref = await system.spawn(Adder, "quiet")
        assert system._cells["quiet"].policy.every == 3
        assert await ref.ask(Add(1), message_id="q1") == 1
    assert store.calls["read_events"] == 1 and store.calls["list_snapshots"] == 1


async def test_an_id_deleted_and_spawned_again_starts_new(tmp_path: Path) -> None:
    # deleted through a plain store: ``system.delete`` checks for ``AuditStore`` by
    # isinstance, which on Python >= 3.12 does not see the wrapper's delegated methods
    async with ActorSystem(SqliteStore(tmp_path / "a.db"), actors=[Adder]) as system:
        ref = await system.spawn(Adder, "gone", snapshot_every=2)
        for i in range(3):
            await ref.ask(Add(1), message_id=f"g{i}")
        await system.terminate("gone")
        await system.delete("gone")
    store = GatedStore(SqliteStore(tmp_path / "a.db"))
    async with ActorSystem(store, actors=[Adder]) as system:
        before = store.calls["read_events"]
        ref = await system.spawn(Adder, "gone")
        assert await ref.ask(Add(5), message_id="g0") == 5  # a new log: g0 is a new id
        assert store.calls["read_events"] == before


# -- PostgreSQL: the registration tells (``INSERT ... ON CONFLICT DO NOTHING RETURNING``) ----


@pytest.fixture
async def pg_schema() -> AsyncIterator[tuple[str, str]]:
    """A fresh schema on the test server: (url, schema)."""
    url = _pg.postgres_url("the spawn cases on PostgreSQL")
    schema = _pg.new_schema("spawn")
    yield url, schema
    await _pg.drop_schemas(url, schema)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_postgres_register_actor_says_when_it_inserted_the_row(
    pg_schema: tuple[str, str],
) -> None:
    from actorlog.stores import PostgresStore

    await _registers_and_says_when_it_inserted(PostgresStore(pg_schema[0], schema=pg_schema[1]))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_new_actor_on_postgres_without_leases_starts_without_recovery_reads(
    pg_schema: tuple[str, str],
) -> None:
    """A runtime without an owner (no leases: it alone writes its actors) starts a new actor
    from an empty plan, as on SQLite; what it wrote is recovered by the next runtime."""
    from actorlog.stores import PostgresStore

    store = GatedStore(PostgresStore(pg_schema[0], schema=pg_schema[1]))
    async with ActorSystem(store, actors=[Adder]) as system:
        ref = await system.spawn(Adder, "new")
        assert await ref.ask(Add(2), message_id="m1") == 2
        assert await ref.ask(Add(2), message_id="m1") == 2  # the recorded reply
        assert await ref.ask(Add(3), message_id="m2") == 5
        cell = system._cells["new"]
        assert cell.last_recovery is not None and cell.last_recovery.entries_read == 0
    for name in (*RECOVERY_READS, "message_ids"):
        assert store.calls[name] == 0, name
    assert store.calls["get_actor"] == 0 and store.calls["register_actor"] == 1
    async with ActorSystem(PostgresStore(pg_schema[0], schema=pg_schema[1])) as system:
        system.register(Adder)
        ref = await system.spawn(Adder, "new")
        assert await ref.ask(Add(2), message_id="m1") == 2
        assert await ref.ask(Add(1), message_id="m3") == 6


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_new_actor_on_postgres_with_leases_is_still_recovered(
    pg_schema: tuple[str, str],
) -> None:
    """With leases the registration's ``created`` is not enough: between the insert and
    this runtime's claim, an operator's terminate (or another runtime) can write the actor
    without this runtime's lease (docs/stores.md). Its cell reads the store as always."""
    from actorlog.stores import PostgresStore

    class Counted(PostgresStore):
        """A real PostgreSQL store counting two of recovery's reads (GatedStore turns the
        leases' plain methods into coroutines)."""

        reads: ClassVar[list[str]] = []

        async def read_events(self, actor_id: str, *args: Any, **kwargs: Any) -> Any:
            self.reads.append("read_events")
            return await super().read_events(actor_id, *args, **kwargs)

        async def list_snapshots(self, actor_id: str) -> Any:
            self.reads.append("list_snapshots")
            return await super().list_snapshots(actor_id)

    store = Counted(pg_schema[0], schema=pg_schema[1])
    async with ActorSystem(store, actors=[Adder], owner="one") as system:
        ref = await system.spawn(Adder, "leased")
        assert await ref.ask(Add(4), message_id="l1") == 4
        assert (await store.get_actor("leased")) is not None
    assert "read_events" in Counted.reads and "list_snapshots" in Counted.reads
