"""Fencing tokens for the outside world, end to end (issue 12, points 2 and 3).

A runtime process owns actor ``r`` and is SIGSTOPped during a step that calls a tool of a
fake external service enforcing fencing tokens (``fence_service.py``); the actor is taken
over meanwhile by a runtime in this process, which re-runs the idempotent call with the
new token. When the paused runtime continues, no stale call is accepted: paused before the
tool started, it starts no tool at all (the lease check); paused inside the tool, after the
check, its request arrives with the old token and the service refuses it.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.stores import PostgresStore

from tests._owner import OwnerProcess

from .._keys import Key
from . import agents
from .agents import Remote
from .fence_service import FenceService

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("pause_at", ["intent", "tool"])
async def test_no_stale_call_reaches_the_outside_world_after_a_takeover(
    pg_url: str, pg_schema: str, pause_at: str, owner_processes: Callable[..., OwnerProcess]
) -> None:
    ttl = 1.0
    service = FenceService()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    agents.SERVICE[:] = [port]
    agents.OWNER[0] = "new"
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()  # the schema exists before the worker starts
    await store.close()
    zombie = owner_processes(
        "tests.cluster.worker", "fenced", pg_url, pg_schema, ttl, port, pause_at
    )
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, service.handle)
        line = await zombie.next_line()
        assert line == "paused-here", line
        zombie.pause()
        store = PostgresStore(pg_url, schema=pg_schema)
        async with ActorSystem(store, actors=[Remote], owner="new", lease_ttl=ttl):
            # The paused runtime's lease expires; the take-over scan recovers r here,
            # and the in-doubt idempotent call runs again with the new token.
            with anyio.fail_after(ttl * 15):
                while not await store.find_ref("r", "step", 1):
                    await anyio.sleep(0.05)
            before = [(r.seq, r.kind) for r in await store.read("r")]
            lease = await store.get_lease("r")
            assert lease is not None and lease[0] == "new"
            new_token = lease[1]
            zombie.resume()
            line = await zombie.next_line()
            assert line == "stopped LeaseLostError", line
            assert [(r.seq, r.kind) for r in await store.read("r")] == before
        tg.cancel_scope.cancel()
    zombie_calls = [r for r in service.log if r.owner == "zombie"]
    if pause_at == "intent":
        # Paused after its intent committed, before the tool: it starts no tool.
        assert zombie_calls == [], service.log
    else:
        # Paused inside the tool: its request arrives, with the old token, and is refused.
        assert [(r.token, r.accepted) for r in zombie_calls] == [(new_token - 1, False)]
    assert [(r.owner, r.key, r.token) for r in service.accepted()] == [
        ("new", Key("r", 1, 0), new_token)
    ]
    zombie.say()
    assert await zombie.wait() == 0
