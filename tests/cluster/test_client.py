"""Client mode: a process that owns no actors and only sends and asks (issue 12, point 5);
answers after a take-over are announced like any other (point 7)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, ConfigurationError
from actorlog.stores import PostgresStore, SqliteStore

from tests._owner import ROOT, OwnerProcess

from .agents import Account, Deposit, Nap, Sleeper

pytestmark = pytest.mark.anyio


async def test_a_client_places_nothing_and_is_answered_by_the_owner(
    pg_url: str, pg_schema: str
) -> None:
    runtime = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Account], owner="r", lease_ttl=2.0
    )
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with runtime, client:
        ref = client.ref(Account, "fresh")  # never spawned anywhere: the runtime places it
        assert await ref.ask(Deposit(3), message_id="c-1", timeout=10) == 3
        await ref.send(Deposit(1), message_id="c-2")
        assert await ref.ask(Deposit(0), message_id="c-3", timeout=10) == 4
        assert await ref.ask(Deposit(3), message_id="c-1", timeout=10) == 3  # recorded reply
        spawned = await client.spawn(Account, "spawned")  # registers, does not start it
        assert await spawned.ask(Deposit(5), timeout=10) == 5
        assert client.status("fresh") == client.status("spawned") == "unknown"
        assert runtime.status("fresh") in ("running", "idle")
        for actor_id in ("fresh", "spawned"):
            lease = await runtime.store.get_lease(actor_id)  # type: ignore[attr-defined]
            assert lease is not None and lease[0] == "r"
    # With no runtime left, a client takes nothing over: its ask waits (and times out);
    # the message stays queued and a runtime that starts later answers it.
    async with ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True) as client:
        ref = client.ref(Account, "fresh")
        with pytest.raises(TimeoutError):
            await ref.ask(Deposit(10), message_id="c-4", timeout=1.5)
        async with ActorSystem(
            PostgresStore(pg_url, schema=pg_schema), actors=[Account], owner="r2", lease_ttl=2
        ):
            assert await ref.ask(Deposit(10), message_id="c-4", timeout=10) == 14


async def test_client_mode_needs_a_store_with_leases(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="client=True"):
        ActorSystem(SqliteStore(tmp_path / "a.db"), client=True)


async def test_answers_after_a_takeover_are_announced(
    pg_url: str, pg_schema: str, owner_processes: Callable[..., OwnerProcess]
) -> None:
    """A remote ask whose message the first owner had already logged (out of the inbox)
    when it was paused is answered by the new owner's announcement, not found by the
    asker's fallback poll (30 s here)."""
    ttl = 1.0
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()
    await store.close()
    zombie = owner_processes("tests.cluster.worker", "zombie", pg_url, pg_schema, ttl)
    client = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), client=True, reply_poll_interval=30.0
    )
    async with client, anyio.create_task_group() as tg:
        line = await zombie.next_line()
        assert line == "in-tool", line  # the zombie's first step naps
        answer: list[str] = []

        async def ask() -> None:
            ref = client.ref(Sleeper, "z")
            answer.append(await ref.ask(Nap(0.0), message_id="q-1", timeout=20))

        tg.start_soon(ask)
        with anyio.fail_after(10):  # the owner logs it (behind the nap) ...
            while await client.store.find_message("z", "q-1") is None:
                await anyio.sleep(0.02)
        zombie.pause()  # ... and pauses before handling it
        runtime = ActorSystem(
            PostgresStore(pg_url, schema=pg_schema),
            actors=[Sleeper],
            owner="new",
            lease_ttl=ttl,
        )
        async with runtime:  # takes z over after the lease, handles q-1 from the log
            with anyio.fail_after(10):
                while not answer:
                    await anyio.sleep(0.02)
    assert answer == ["rested"]
    zombie.kill()


async def test_client_mode_example_runs(pg_url: str, pg_schema: str) -> None:
    example = ROOT / "examples" / "client_mode.py"
    done = await anyio.run_process(
        [sys.executable, str(example), "demo", pg_url, "--schema", pg_schema]
    )
    assert done.stdout.decode().splitlines() == [
        "/deposit/acct-1/5?request_id=r-1 -> {'total': 5}",
        "/deposit/acct-1/7?request_id=r-2 -> {'total': 12}",
        "/deposit/acct-1/7?request_id=r-2 -> {'total': 12}",
    ]
