"""The inbox across runtimes: a message the owner cannot decode does not block the ones
after it (issue 18, item 14)."""

from __future__ import annotations

import anyio
import attrs
import pytest
from actorlog import ActorSystem, HandlerError
from actorlog.stores import PostgresStore

from .agents import Account, Deposit

pytestmark = pytest.mark.anyio


@attrs.define
class NotDeployedYet:
    """A message type the owning runtime does not know (a rolling deploy): its tag names
    a module the owner cannot import."""

    __actorlog_tag__ = "tests.multi.next_release.NotDeployedYet"
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
        assert "tests.multi.next_release.NotDeployedYet" in str(info.value)
        assert await remote.ask(Deposit(2), message_id="m-3", timeout=10) == 2
        store = old.store
        for mid in ("u-1", "u-2"):  # logged as they came, each with a failed step
            row = await store.find_message("acct", mid)
            assert row is not None and row.type_tag == "tests.multi.next_release.NotDeployedYet"
            assert len(await store.find_ref("acct", "step", row.seq)) == 1
        assert old.status("acct") in ("running", "idle")
    # Recovering the actor (the same release) replays past the failed steps.
    async with _system(pg_url, pg_schema, "old") as again:
        assert await again.ref(Account, "acct").ask(Deposit(1), timeout=10) == 3
        with anyio.fail_after(5):
            while again.status("acct") not in ("running", "idle"):
                await anyio.sleep(0.02)
