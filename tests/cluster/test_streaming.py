"""``ask_stream`` on PostgreSQL with leases: the runtime that owns the actor streams its
events; a client-mode system (or a runtime that does not own it) gets a typed error before
anything is written, and ``ask`` still reaches it (docs/streaming.md, "Where it works")."""

from __future__ import annotations

import pytest
from actorlog import ActorSystem, ConfigurationError
from actorlog.stores import PostgresStore

from tests.durability.stream_agents import Narrator, Tell

pytestmark = pytest.mark.anyio


async def test_the_owner_streams_a_client_is_refused_before_anything_is_written(
    pg_url: str, pg_schema: str
) -> None:
    runtime = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Narrator], owner="r", lease_ttl=2.0
    )
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with runtime, client:
        owned = await runtime.spawn(Narrator, "n")
        stream = owned.ask_stream(Tell("x", 1), message_id="q-1")
        assert [ev.data async for ev in stream] == ["start", {"stage": "about x", "done": 0}]
        assert stream.reply == "told 1"

        remote = client.ref(Narrator, "n")
        with pytest.raises(ConfigurationError, match="another process"):
            async for _ in remote.ask_stream(Tell("y", 1), message_id="q-2"):
                pass
        store = runtime.store
        assert isinstance(store, PostgresStore)
        assert await store.inbox_for("r") == []  # nothing queued for the owner
        assert [r.message_id for r in await runtime.store.read("n") if r.kind == "message"] == [
            "q-1"
        ]
        # the reply path to clients is there: ask reaches the owner
        assert await remote.ask(Tell("y", 1), message_id="q-2", timeout=10) == "told 1"
