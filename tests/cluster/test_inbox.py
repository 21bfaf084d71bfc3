"""The inbox across runtimes: a message the owner cannot decode does not block the ones
after it (issue 18, item 14)."""

from __future__ import annotations

import anyio
import attrs
import pytest
from actorlog import ActorSystem, HandlerError, MessageIdReusedError
from actorlog.stores import PostgresStore

from .agents import Account, Deposit

pytestmark = pytest.mark.anyio


@attrs.define
class NotDeployedYet:
    """A message type the owning runtime does not know (a rolling deploy): its tag names
    a module the owner cannot import."""

    __actorlog_tag__ = "tests.cluster.next_release.NotDeployedYet"
    note: str = "new"


def _system(url: str, schema: str, owner: str) -> ActorSystem:
    return ActorSystem(
        PostgresStore(url, schema=schema), actors=[Account], owner=owner, lease_ttl=2.0
    )


async def test_an_undecodable_inbox_message_fails_its_step_and_the_inbox_moves_on(
    pg_url: str, pg_schema: str
) -> None:
    async with _system(pg_url, pg_schema, "old") as old, _system(pg_url, pg_schema, "new") as new:
        await old.spawn(Account, "acct")
        remote = new.ref(Account, "acct")
        await remote.send(NotDeployedYet(), message_id="u-1")  # queued behind nothing
        with pytest.raises(HandlerError) as info:
            await remote.ask(NotDeployedYet(), message_id="u-2", timeout=10)
        assert "tests.cluster.next_release.NotDeployedYet" in str(info.value)
        assert await remote.ask(Deposit(2), message_id="m-3", timeout=10) == 2
        store = old.store
        for mid in ("u-1", "u-2"):  # logged as they came, each with a failed step
            row = await store.find_message("acct", mid)
            assert row is not None and row.type_tag == "tests.cluster.next_release.NotDeployedYet"
            assert len(await store.find_ref("acct", "step", row.seq)) == 1
        assert old.status("acct") in ("running", "idle")
    # Recovering the actor (the same release) replays past the failed steps.
    async with _system(pg_url, pg_schema, "old") as again:
        assert await again.ref(Account, "acct").ask(Deposit(1), timeout=10) == 3
        with anyio.fail_after(5):
            while again.status("acct") not in ("running", "idle"):
                await anyio.sleep(0.02)


async def test_a_message_id_reused_for_another_message_through_the_inbox_is_refused(
    pg_url: str, pg_schema: str
) -> None:
    """Issue 29 item 2, client mode: a reused id with another message raises
    ``MessageIdReusedError`` while the first is still queued in the inbox and once it is
    logged; the owner never handles the other message; the same message gets its reply."""
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with client:  # no runtime owns the actor yet: the messages stay in the inbox
        ref = client.ref(Account, "acct")
        await ref.send(Deposit(1), message_id="m-1")
        await ref.send(Deposit(1), message_id="m-1")  # the same message again: accepted
        with pytest.raises(MessageIdReusedError) as info:
            await ref.send(Deposit(2), message_id="m-1")
        assert (info.value.actor_id, info.value.message_id, info.value.seq) == (
            "acct",
            "m-1",
            None,
        )
        with pytest.raises(MessageIdReusedError):
            await ref.ask(Deposit(2), message_id="m-1", timeout=10)
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with _system(pg_url, pg_schema, "owner") as owner, client:
        ref = client.ref(Account, "acct")
        assert await ref.ask(Deposit(0), message_id="m-2", timeout=10) == 1  # m-1 handled
        with pytest.raises(MessageIdReusedError) as info:
            await ref.ask(Deposit(5), message_id="m-1", timeout=10)
        assert info.value.seq is not None
        with pytest.raises(MessageIdReusedError):
            await ref.send(Deposit(5), message_id="m-1")
        with pytest.raises(MessageIdReusedError):  # through the owner's own ref too
            await owner.ref(Account, "acct").ask(Deposit(7), message_id="m-2")
        assert await ref.ask(Deposit(1), message_id="m-1", timeout=10) == 1  # its reply
        assert await ref.ask(Deposit(0), message_id="m-3", timeout=10) == 1  # 5 never booked
        store = owner.store
        assert isinstance(store, PostgresStore)
        assert [r.message_id for r in await store.read("acct", kinds=["message"])] == [
            "m-1",
            "m-2",
            "m-3",
        ]
        assert not await store.inbox_for("owner")  # nothing left retried in the inbox
