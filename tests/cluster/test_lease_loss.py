"""A runtime that loses an actor's lease: it stops the actor (never quarantines it), writes
nothing more for it (entries, events, snapshots), starts no tool once its lease is no longer
certain, and lets go of the leases of actors it stopped (issue 12, issue 18 item 13)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, LeaseLostError, SequenceConflictError, ops, tool
from actorlog._journal import codec as _codec, records as _records
from actorlog.store import EntryRow
from actorlog.stores import MemoryStore, PostgresStore

from tests._pg import take_over

from .._keys import Key
from .agents import Account, Deposit

pytestmark = pytest.mark.anyio


@attrs.define
class Hold:
    label: str


@attrs.define
class Seen:
    calls: list[str] = attrs.Factory(list)


#: set by the test: the gate the ``held`` tool waits on, and where it says it started
GATE: list[anyio.Event] = []
STARTED: list[anyio.Event] = []
CALLS: list[tuple[str, int]] = []


@tool(effect="read")
async def held(label: str) -> str:
    if STARTED:
        STARTED[0].set()
    if GATE:
        await GATE[0].wait()
    return label


@tool(effect="write", idempotent=True)
async def fenced_write(label: str, *, idempotency_key: str, fencing_token: int) -> int:
    CALLS.append((idempotency_key, fencing_token))
    return fencing_token


class Gated(Actor[Seen]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Hold) -> str:
        out = await ctx.call(held, msg.label)
        self.state.calls.append(out)
        return out


class Fenced(Actor[Seen]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Hold) -> int:
        token = await ctx.call(fenced_write, msg.label)
        assert token == ctx.fencing_token
        return token


def _system(url: str, schema: str, owner: str, ttl: float = 30.0) -> ActorSystem:
    return ActorSystem(
        PostgresStore(url, schema=schema),
        actors=[Account, Gated, Fenced],
        owner=owner,
        lease_ttl=ttl,
    )


@asynccontextmanager
async def _thief(url: str, schema: str) -> AsyncIterator[PostgresStore]:
    """Another runtime's store, used to take leases over (as after a long pause)."""
    other = PostgresStore(url, schema=schema)
    await other.open()
    try:
        yield other
    finally:
        await other.close()


async def _take_over(other: PostgresStore, actor_id: str, owner: str = "b") -> int:
    return await take_over(other, actor_id, owner)


async def test_a_rejected_append_with_a_step_in_flight_stops_and_never_quarantines(
    pg_url: str, pg_schema: str
) -> None:
    """The post's append is fenced (LeaseLostError) while a step is inside a tool; the step
    then meets a broken journal: the actor is ``stopped`` with LeaseLostError, the ask gets
    that error (not ActorQuarantinedError), and the actor can be used again later."""
    GATE[:] = [anyio.Event()]
    STARTED[:] = [anyio.Event()]
    try:
        async with _system(pg_url, pg_schema, "a") as a, _thief(pg_url, pg_schema) as other:
            ref = await a.spawn(Gated, "g")
            outcome: list[BaseException | str] = []

            async def ask() -> None:
                try:
                    outcome.append(await ref.ask(Hold("first"), timeout=10))
                except Exception as exc:
                    outcome.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                with anyio.fail_after(10):
                    await STARTED[0].wait()
                token = await _take_over(other, "g")
                with pytest.raises(LeaseLostError):
                    await ref.send(Hold("second"))  # fenced: rejected by the database
                GATE[0].set()  # the step goes on and meets the broken journal
            assert a.status("g") == "stopped"
            assert isinstance(a.error("g"), LeaseLostError)
            assert len(outcome) == 1 and isinstance(outcome[0], LeaseLostError), outcome
            # Once the other runtime lets it go, using the actor here takes it back.
            await other.release_lease("g", "b", token)
            GATE.clear()
            assert await ref.ask(Hold("third"), timeout=10) == "third"
            assert a.status("g") in ("running", "idle")
    finally:
        GATE.clear()
        STARTED.clear()


async def test_the_loser_writes_no_event_and_status_stays_true(pg_url: str, pg_schema: str) -> None:
    """The runtime that lost the actor records no ``stopped`` event (fenced like entries):
    the operator's status comes from the current owner's history, not the loser's."""
    async with _system(pg_url, pg_schema, "a", ttl=0.6) as a, _thief(pg_url, pg_schema) as other:
        ref = await a.spawn(Account, "acct")
        assert await ref.ask(Deposit(1)) == 1
        await _take_over(other, "acct")
        with anyio.fail_after(5):
            while a.status("acct") != "stopped":
                await anyio.sleep(0.02)
        assert isinstance(a.error("acct"), LeaseLostError)
        await anyio.sleep(0.3)  # events are recorded in the background
        kinds = [e.kind for e in await other.read_events("acct")]
        assert "stopped" not in kinds and "quarantined" not in kinds, kinds
        status = await ops.actor_status(other, "acct")
        assert status.status == "idle", status


async def test_events_of_a_stale_owner_are_refused_by_the_store(
    pg_url: str, pg_schema: str
) -> None:
    async with _thief(pg_url, pg_schema) as old, _thief(pg_url, pg_schema) as new:
        await old.register_actor("x", "t")
        t1 = await old.acquire_lease("x", "old", 30)
        assert t1 is not None
        old.set_fence("x", t1)
        await old.record_event("x", "recovered", "{}")
        t2 = await _take_over(new, "x", "new")
        new.set_fence("x", t2)
        await old.record_event("x", "stopped", '{"error": "stale"}')  # refused, quietly
        await new.record_event("x", "recovered", "{}")
        assert [e.kind for e in await new.read_events("x")] == ["recovered", "recovered"]


class _PausingStore(PostgresStore):
    """Blocks the whole process (as a GC pause or SIGSTOP would: no renewal runs) for
    ``pause`` seconds right after an intent of ``held`` commits (once)."""

    pause = 0.0

    async def append(
        self,
        actor_id: str,
        expected_last_seq: int,
        rows: Sequence[EntryRow],
        *,
        fence: int | None = None,
    ) -> None:
        await super().append(actor_id, expected_last_seq, rows, fence=fence)
        if any(r.kind == "intent" and r.type_tag == held.name for r in rows):
            time.sleep(self.pause)  # noqa: ASYNC251 -- the point: a pause of the process
            self.pause = 0.0


async def test_no_tool_starts_once_the_lease_is_no_longer_certain(
    pg_url: str, pg_schema: str
) -> None:
    """A pause after the tool's intent is durable and longer than 3/4 of the lease: the
    tool is not started (nobody took the actor over, but another runtime might have), and
    the actor stops (LeaseLostError, never quarantined)."""
    STARTED[:] = [anyio.Event()]
    ttl = 1.0
    store = _PausingStore(pg_url, schema=pg_schema)
    store.pause = ttl * 0.8
    try:
        async with ActorSystem(store, actors=[Gated], owner="a", lease_ttl=ttl) as a:
            ref = await a.spawn(Gated, "s")
            with pytest.raises(LeaseLostError):
                await ref.ask(Hold("x"), timeout=10)
            assert not STARTED[0].is_set()
            assert a.status("s") == "stopped"
            kinds = [r.kind for r in await store.read("s")]
            assert kinds == ["message", "intent"], kinds
            # Stopped, not quarantined, and its lease let go: it is placed again (here: the
            # take-over scan finds its unfinished step) and the tool runs, as in doubt.
            with anyio.fail_after(10):
                await STARTED[0].wait()
    finally:
        STARTED.clear()


async def test_tools_and_handlers_see_the_fencing_token(pg_url: str, pg_schema: str) -> None:
    CALLS.clear()
    async with _system(pg_url, pg_schema, "a") as a, _thief(pg_url, pg_schema) as other:
        await other.register_actor("f", "tests.cluster.test_lease_loss.Fenced")
        for _ in range(3):  # the token has moved on a few times before
            t = await other.acquire_lease("f", "b", 30)
            assert t is not None
            await other.release_lease("f", "b", t)
        ref = await a.spawn(Fenced, "f")
        assert await ref.ask(Hold("x")) == 4
        assert [(Key("f", 1, 0), 4)] == CALLS
    async with ActorSystem(MemoryStore(), actors=[Fenced]) as m:
        assert await (await m.spawn(Fenced, "f")).ask(Hold("x")) == 0  # no leases: 0


async def test_a_stopped_actor_lets_its_lease_go(pg_url: str, pg_schema: str) -> None:
    """Issue 18.13: an actor stopped by a sequence conflict (an unfenced writer appended to
    its log) is not kept: its lease is released, and an ask from another runtime that
    waits in the inbox is answered by whoever takes it over."""
    async with _system(pg_url, pg_schema, "a", ttl=0.6) as a, _thief(pg_url, pg_schema) as other:
        ref = await a.spawn(Account, "acct")
        assert await ref.ask(Deposit(1)) == 1
        row = await other.get_actor("acct")
        assert row is not None
        data = _codec.encode_plain(_records.message_payload({"n": 5}, sender=None, trace=None), "m")
        intruder = _codec.make_row(
            "acct", row.last_seq + 1, "message", _codec.type_tag(Deposit), 0, "intruder", data
        )
        await other.append("acct", row.last_seq, [intruder])  # no fencing token: allowed
        with pytest.raises(SequenceConflictError):
            await ref.ask(Deposit(1), timeout=5)
        assert a.status("acct") == "stopped"
        async with _system(pg_url, pg_schema, "b", ttl=0.6) as b:
            assert await b.ref(Account, "acct").ask(Deposit(2), message_id="m-b", timeout=10) == 8
