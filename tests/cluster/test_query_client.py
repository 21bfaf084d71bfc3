"""Read-only queries across runtimes on PostgreSQL (issue 29 item 3): a client-mode process
(and a runtime that does not own the actor) queries the actor's last durable state, read
from the shared database; it logs nothing, starts nothing and takes no lease."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from actorlog import ActorSystem, ReadOnlyQueryError
from actorlog.stores import PostgresStore

from ..runtime.query_agents import RUNS, SELF_REFS, Add, Items, Keeper, Last, Tamper

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    RUNS.clear()
    SELF_REFS.clear()
    yield
    RUNS.clear()
    SELF_REFS.clear()


async def test_a_client_queries_the_durable_state_of_an_actor_run_elsewhere(
    pg_url: str, pg_schema: str
) -> None:
    runtime = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Keeper], owner="r", lease_ttl=5.0
    )
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with runtime, client:
        ref = client.ref(Keeper, "k")
        assert await ref.ask(Add("a"), message_id="a", timeout=20) == 1
        # an answered ask is durable: the client's next query sees its step
        assert await ref.query(lambda s: list(s.items), timeout=20) == ["A"]
        assert await ref.ask(Add("b"), message_id="b", timeout=20) == 2
        row = await runtime.store.get_actor("k")
        assert row is not None
        assert await ref.query(Last(1), timeout=20) == ["B"]
        state = await client.read_state(Keeper, "k")
        assert isinstance(state, Items) and state.items == ["A", "B"]
        SELF_REFS["k"] = ref
        for how in ("append", "tool", "send"):
            with pytest.raises(ReadOnlyQueryError):
                await ref.query(Tamper(how), timeout=20)
        after = await runtime.store.get_actor("k")
        assert after is not None and after.last_seq == row.last_seq  # nothing logged
        assert client.status("k") == "unknown"  # nothing started in the client
        lease = await runtime.store.get_lease("k")  # type: ignore[attr-defined]
        assert lease is not None and lease[0] == "r"  # the owner kept it
        # the owner answers the same, from its live state
        assert await runtime.ref(Keeper, "k").query(Last(2)) == ["A", "B"]
    assert RUNS == ["a", "b"]  # queries ran no tool, and replaying the log ran none


async def test_a_runtime_that_does_not_own_the_actor_queries_its_durable_state(
    pg_url: str, pg_schema: str
) -> None:
    a = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Keeper], owner="a", lease_ttl=5.0
    )
    b = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Keeper], owner="b", lease_ttl=5.0
    )
    async with a, b:
        await (await a.spawn(Keeper, "k")).ask(Add("x"), timeout=20)
        assert await b.ref(Keeper, "k").query(lambda s: list(s.items), timeout=20) == ["X"]
        lease = await a.store.get_lease("k")  # type: ignore[attr-defined]
        assert lease is not None and lease[0] == "a"
    assert RUNS == ["x"]


async def test_a_query_of_an_actor_the_database_does_not_hold_creates_none(
    pg_url: str, pg_schema: str
) -> None:
    """docs/queries.md: a query logs nothing and creates no actor, also on a runtime with
    leases (whose routing would start the actor, so register it and take its lease) and
    from a client: ``ActorNotFoundError``, nothing registered."""
    from actorlog import ActorNotFoundError

    store = PostgresStore(pg_url, schema=pg_schema)
    runtime = ActorSystem(store, actors=[Keeper], owner="r", lease_ttl=5.0)
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with runtime, client:
        for system in (runtime, client):
            with pytest.raises(ActorNotFoundError):
                await system.ref(Keeper, "typo").query(lambda s: s.items)
        assert await store.get_actor("typo") is None
