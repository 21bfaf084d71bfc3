"""``ActorSystem.resolve`` rules on a cancelled write in doubt of an actor that another
runtime owns (issue 25): the ruling goes through the owner's inbox, the owner records it
(one ruling per call, checked by the one runtime that runs the actor), and the caller
returns once it is recorded, or gets ``AlreadyDecidedError`` when another ruling was first.
Owner and client are two runtimes over one PostgreSQL schema in this process.

Before: a runtime that did not run the actor refused with ``ActorNotFoundError``.
"""

from __future__ import annotations

import anyio
import pytest
from actorlog import ActorSystem, ops
from actorlog.errors import AlreadyDecidedError, ConfigurationError
from actorlog.store import Store
from actorlog.stores import PostgresStore

from tests.effects.test_cancelled_write_in_doubt import Agent, Deadline, _fresh

pytestmark = pytest.mark.anyio


def _owner(pg_url: str, pg_schema: str) -> ActorSystem:
    return ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Agent], owner="r", lease_ttl=2.0
    )


def _client(pg_url: str, pg_schema: str) -> ActorSystem:
    return ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)


async def _cancelled_calls(owner: ActorSystem, n: int) -> list[int]:
    ref = await owner.spawn(Agent, "a")
    for i in range(n):
        assert await ref.ask(Deadline(), message_id=f"d{i}") == "went on"
    calls = await ops.calls_needing_ruling(owner.store, "a")
    with anyio.fail_after(20):  # the runtime's in_doubt events (recorded in the background)
        while sum(e.kind == "in_doubt" for e in await owner.store.read_events("a")) < n:
            await anyio.sleep(0.02)
    return [c.intent_seq for c in calls]


async def _rulings(store: Store) -> list[dict[str, object]]:
    h = await ops.history(store, "a")
    return [e.detail for e in h.events if e.kind == "resolved"]


async def test_a_client_rules_through_the_owner(pg_url: str, pg_schema: str) -> None:
    _fresh()
    async with _owner(pg_url, pg_schema) as owner, _client(pg_url, pg_schema) as client:
        (seq,) = await _cancelled_calls(owner, 1)
        last = (await ops.actor_status(owner.store, "a")).last_seq
        with pytest.raises(ConfigurationError, match="a retry cannot run"):
            await client.resolve("a", seq, retry=True)
        with anyio.fail_after(30):
            await client.resolve("a", seq, result="TX-1", by="ops@example.com", reason="bank")
        (rec,) = await _rulings(owner.store)  # recorded by the owner, once
        assert rec["ruling"] is True and rec["offline"] is False
        assert (rec["intent_seq"], rec["value"], rec["by"]) == (seq, "TX-1", "ops@example.com")
        (call,) = (await ops.history(owner.store, "a")).steps[0].calls
        assert call.ruling is not None and not call.needs_ruling
        with pytest.raises(AlreadyDecidedError):
            await client.resolve("a", seq, fail="no")
        assert len(await _rulings(owner.store)) == 1
        assert (await ops.actor_status(owner.store, "a")).last_seq == last  # no entry


async def test_rulings_from_both_runtimes_at_once_record_one(pg_url: str, pg_schema: str) -> None:
    _fresh()
    async with _owner(pg_url, pg_schema) as owner, _client(pg_url, pg_schema) as client:
        (seq,) = await _cancelled_calls(owner, 1)
        outcomes: dict[str, str] = {}

        async def rule(system: ActorSystem, name: str) -> None:
            try:
                with anyio.fail_after(30):
                    await system.resolve("a", seq, result=name, by=name)
                outcomes[name] = "ok"
            except AlreadyDecidedError:
                outcomes[name] = "refused"

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(rule, client, f"client-{i}")
                tg.start_soon(rule, owner, f"owner-{i}")
        assert sorted(outcomes.values()) == ["ok"] + ["refused"] * 5
        (rec,) = await _rulings(owner.store)
        assert outcomes[str(rec["by"])] == "ok"


async def test_a_ruling_queued_while_no_runtime_owns_the_actor_loses_to_an_earlier_one(
    pg_url: str, pg_schema: str
) -> None:
    """The client's ruling waits in the inbox (the owner is gone); an operator rules offline
    meanwhile: the client gets ``AlreadyDecidedError``, and the owner that takes the actor
    over later drops the queued ruling (one ruling recorded, the inbox drained)."""
    _fresh()
    async with _owner(pg_url, pg_schema) as owner:
        (seq,) = await _cancelled_calls(owner, 1)
    async with _client(pg_url, pg_schema) as client:
        got: list[BaseException] = []

        async def rule() -> None:
            try:
                await client.resolve("a", seq, result="late", by="client")
            except AlreadyDecidedError as exc:
                got.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(rule)
            await anyio.sleep(0.3)  # either order ends the same: the offline ruling is first
            await ops.resolve(client.store, "a", seq, fail="never sent", by="offline")
        (exc,) = got
        assert isinstance(exc, AlreadyDecidedError) and exc.by == "offline"
    async with _owner(pg_url, pg_schema) as owner:
        await owner.spawn(Agent, "a")
        store = owner.store
        assert isinstance(store, PostgresStore)
        with anyio.fail_after(30):  # the owner drained the queued ruling
            while await store.inbox_for("r"):
                await anyio.sleep(0.05)
        (rec,) = await _rulings(store)
        assert rec["by"] == "offline"
