"""Several ActorSystems (runtimes) on one PostgreSQL database, in one process."""

from __future__ import annotations

import anyio
import pytest
from actorlog import ActorSystem, ConfigurationError, HandlerError, LeaseLostError
from actorlog.stores import PostgresStore, SqliteStore

from tests._pg import take_over

from .agents import LEDGER, Account, Deposit

pytestmark = pytest.mark.anyio


def _system(url: str, schema: str, owner: str, ttl: float = 1.0) -> ActorSystem:
    return ActorSystem(
        PostgresStore(url, schema=schema), actors=[Account], owner=owner, lease_ttl=ttl
    )


async def test_one_owner_others_deliver_through_the_store(pg_url: str, pg_schema: str) -> None:
    LEDGER.clear()
    async with _system(pg_url, pg_schema, "a") as a, _system(pg_url, pg_schema, "b") as b:
        ra = await a.spawn(Account, "acct")
        assert a.status("acct") in ("running", "idle")
        rb = await b.spawn(Account, "acct")  # owned by a: b does not start it
        assert b.status("acct") == "unknown"
        assert await ra.ask(Deposit(1)) == 1
        assert await rb.ask(Deposit(2), message_id="m-2", timeout=10) == 3
        assert await rb.ask(Deposit(2), message_id="m-2", timeout=10) == 3  # recorded reply
        await rb.send(Deposit(4), message_id="m-3")  # durable in the inbox when it returns
        with anyio.fail_after(10):
            while await ra.ask(Deposit(0)) != 7:
                await anyio.sleep(0.02)
        assert b.status("acct") == "unknown"
        with pytest.raises(HandlerError) as info:  # the recorded error crosses runtimes
            await rb.ask(Deposit(-1), timeout=10)
        assert info.value.error_type == "ValueError"
        assert "cannot deposit -1" in str(info.value)
    assert sorted(n for _, n in LEDGER if n) == [1, 2, 4]


async def test_released_on_exit_and_taken_over(pg_url: str, pg_schema: str) -> None:
    async with _system(pg_url, pg_schema, "a") as a:
        ra = await a.spawn(Account, "acct")
        assert await ra.ask(Deposit(5)) == 5
    async with _system(pg_url, pg_schema, "b") as b:
        rb = b.ref(Account, "acct")
        assert await rb.ask(Deposit(1)) == 6
        assert b.status("acct") in ("running", "idle")


async def test_lost_lease_stops_the_actor_and_the_zombie_cannot_write(
    pg_url: str, pg_schema: str
) -> None:
    async with _system(pg_url, pg_schema, "a", ttl=30) as a:
        ra = await a.spawn(Account, "acct")
        assert await ra.ask(Deposit(1)) == 1
        # Another runtime takes the lease over (as if a's lease had expired during a pause).
        other = PostgresStore(pg_url, schema=pg_schema)
        await other.open()
        try:
            await take_over(other, "acct")
            # The zombie's next append is rejected by the database; it stops the actor.
            with pytest.raises(Exception) as info:
                await ra.ask(Deposit(1), timeout=5)
            assert isinstance(info.value.__cause__, LeaseLostError) or isinstance(
                info.value, LeaseLostError
            )
            assert a.status("acct") == "stopped"
            assert [r.kind for r in await other.read("acct")] == [
                "message",
                "intent",
                "result",
                "step",
            ]
        finally:
            await other.close()


async def test_renewal_notices_a_takeover(pg_url: str, pg_schema: str) -> None:
    async with _system(pg_url, pg_schema, "a", ttl=0.6) as a:
        ra = await a.spawn(Account, "acct")
        assert await ra.ask(Deposit(1)) == 1
        other = PostgresStore(pg_url, schema=pg_schema)
        await other.open()
        try:
            token = await take_over(other, "acct")
            with anyio.fail_after(5):
                while a.status("acct") != "stopped":
                    await anyio.sleep(0.02)
            assert isinstance(a.error("acct"), LeaseLostError)
            # Once the other runtime lets it go, using the actor takes it back.
            await other.release_lease("acct", "b", token)
            assert await ra.ask(Deposit(1)) == 2
            assert a.status("acct") in ("running", "idle")
        finally:
            await other.close()


async def test_dead_runtime_actors_are_taken_over(pg_url: str, pg_schema: str) -> None:
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()
    try:
        # A runtime "died" holding the lease with a queued message.
        await store.register_actor("acct", "tests.cluster.agents.Account")
        assert await store.acquire_lease("acct", "dead", 0.3) is not None
        await store.inbox_put("acct", "m1", "tests.cluster.agents.Deposit", '{"n": 3}', None)
    finally:
        await store.close()
    async with _system(pg_url, pg_schema, "b", ttl=0.6) as b:
        with anyio.fail_after(10):
            while b.status("acct") not in ("running", "idle"):
                await anyio.sleep(0.05)
            while await b.ref(Account, "acct").ask(Deposit(0)) != 3:  # the queued message
                await anyio.sleep(0.02)


async def test_restart_under_the_same_owner_recovers_at_once(pg_url: str, pg_schema: str) -> None:
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()
    try:
        # Runtime "a" crashed holding a long lease, with a message queued for its actor.
        await store.register_actor("acct", "tests.cluster.agents.Account")
        assert await store.acquire_lease("acct", "a", 60) is not None
        await store.inbox_put("acct", "m1", "tests.cluster.agents.Deposit", '{"n": 3}', None)
    finally:
        await store.close()
    async with _system(pg_url, pg_schema, "a", ttl=60) as a:  # restarted under its name
        with anyio.fail_after(5):  # not after the 60 s lease
            while await a.ref(Account, "acct").ask(Deposit(0)) != 3:
                await anyio.sleep(0.02)


async def test_idle_actors_are_passivated_and_come_back(pg_url: str, pg_schema: str) -> None:
    system = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema),
        actors=[Account],
        owner="a",
        lease_ttl=0.6,
        passivate_after=0.3,
    )
    async with system as a:
        changes = a.ownership_changes()
        ref = await a.spawn(Account, "acct")
        assert await ref.ask(Deposit(2)) == 2
        with anyio.fail_after(5):
            async for change in changes:
                if change.kind == "released":
                    assert (change.actor_id, change.reason) == ("acct", "passivated")
                    break
        assert a.status("acct") == "unknown"
        lease = await a.store.get_lease("acct")  # type: ignore[attr-defined]
        assert lease is not None and lease[0] is None  # released
        assert await ref.ask(Deposit(3)) == 5  # recovered on use
        assert a.status("acct") in ("running", "idle")


async def test_a_full_runtime_leaves_new_actors_to_others(pg_url: str, pg_schema: str) -> None:
    full = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Account], owner="a", max_actors=1
    )
    async with full as a, _system(pg_url, pg_schema, "b", ttl=0.6) as b:
        assert await (await a.spawn(Account, "x")).ask(Deposit(1)) == 1
        assert await a.ref(Account, "y").ask(Deposit(4), timeout=10) == 4
        assert a.status("y") == "unknown"
        assert b.status("y") in ("running", "idle")


async def test_owner_is_ignored_without_the_leases_capability(tmp_path: object) -> None:
    import pathlib

    assert isinstance(tmp_path, pathlib.Path)
    async with ActorSystem(SqliteStore(tmp_path / "a.db"), actors=[Account], owner="a") as s:
        with pytest.raises(ConfigurationError):
            s.ownership_changes()  # no leases here
        assert await (await s.spawn(Account, "x")).ask(Deposit(2)) == 2
