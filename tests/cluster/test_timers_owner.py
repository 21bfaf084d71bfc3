"""Timers across runtimes on PostgreSQL: only the owner of an actor fires its timers, and a
take-over carries them (they live in the store)."""

from __future__ import annotations

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.stores import PostgresStore

from tests.time.agents import Get, Note, Recorder

pytestmark = pytest.mark.anyio


def _system(url: str, schema: str, owner: str) -> ActorSystem:
    return ActorSystem(
        PostgresStore(url, schema=schema), actors=[Recorder], owner=owner, lease_ttl=1.0
    )


async def test_only_the_owner_fires_and_a_takeover_carries_timers(
    pg_url: str, pg_schema: str
) -> None:
    async with _system(pg_url, pg_schema, "a") as a, _system(pg_url, pg_schema, "b") as b:
        await a.spawn(Recorder, "rec")  # a owns it
        rb = b.ref(Recorder, "rec")
        await b.send_later(rb, Note("soon"), delay=0.1)  # put by b
        with anyio.fail_after(15):
            while a._timers.fired < 1:
                await anyio.sleep(0.02)
        await anyio.sleep(0.3)
        assert b._timers.fired == 0  # b never fired a timer of a's actor
        await b.send_later(rb, Note("after-takeover"), delay=3.0)
    # a and b leave before that timer is due; c takes the actor over
    async with _system(pg_url, pg_schema, "c") as c:
        with anyio.fail_after(20):
            while c._timers.fired < 1:
                await anyio.sleep(0.02)
        assert await c.ref(Recorder, "rec").ask(Get()) == ["soon", "after-takeover"]
