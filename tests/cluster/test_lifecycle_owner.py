"""Lifecycle commands that reach an actor's owner through PostgreSQL (issue 24 items 8-11):
a terminate through the inbox, queued client asks when the actor ends, a delete while the
owner runs. Owner and client are two runtimes over one schema in this process."""

from __future__ import annotations

import anyio
import pytest
from actorlog import ActorFinishedError, ActorlogError, ActorSystem, ops
from actorlog.stores import PostgresStore

from tests.durability.test_lifecycle import Gated, Hold, Work, _gate, _started

pytestmark = pytest.mark.anyio


def _runtime(pg_url: str, pg_schema: str, owner: str) -> ActorSystem:
    return ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[Gated], owner=owner, lease_ttl=2.0
    )


async def test_terminate_through_the_inbox_answers_queued_client_asks(
    pg_url: str, pg_schema: str
) -> None:
    """Item 8 (PostgreSQL inbox) and item 11: a client's asks queued behind a running step get
    ``ActorFinishedError`` (not a timeout) when an offline terminate reaches the owner through
    the inbox, and the owner's ``system.status`` says ``terminated`` (it stayed ``idle``)."""
    _started.append(anyio.Event())
    _gate.append(anyio.Event())
    owner = _runtime(pg_url, pg_schema, "r")
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    got: dict[int, object] = {}
    async with owner, client:
        await owner.spawn(Gated, "g")
        ref = client.ref(Gated, "g")

        async def ask(i: int, msg: Work | Hold) -> None:
            try:
                got[i] = await ref.ask(msg, message_id=f"c-{i}", timeout=30)
            except (ActorlogError, TimeoutError) as exc:
                got[i] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, 0, Hold())
            await _started[-1].wait()
            for i in range(1, 3):
                tg.start_soon(ask, i, Work(str(i)))
            cell = owner._cells["g"]
            with anyio.fail_after(20):  # both queued in the owner's log
                while cell.journal.last_seq < 4:
                    await anyio.sleep(0.02)
            await ops.terminate(owner.store, "g", by="ops", reason="runaway")
        for i in (1, 2):
            assert isinstance(got[i], ActorFinishedError), got
        assert owner.status("g") == "terminated"
        # a new client ask is answered with the typed error too
        with pytest.raises(ActorFinishedError):
            await ref.ask(Work("late"), message_id="c-late", timeout=30)


async def test_terminate_through_the_inbox_of_an_idle_actor_updates_status(
    pg_url: str, pg_schema: str
) -> None:
    """Item 11: an idle actor terminated offline (``ops.terminate``, the inbox command): its
    owner's ``system.status`` says ``terminated``, not ``idle``."""
    async with _runtime(pg_url, pg_schema, "r") as owner:
        ref = await owner.spawn(Gated, "i")
        assert await ref.ask(Work("a")) == 1
        assert owner.status("i") == "idle"
        await ops.terminate(owner.store, "i", by="ops", reason="done with it")
        cell = owner._cells["i"]
        with anyio.fail_after(20):  # the command reached the owner
            while cell.ended is None:
                await anyio.sleep(0.02)
        assert owner.status("i") == "terminated"
        with pytest.raises(ActorFinishedError, match="done with it"):
            await ref.ask(Work("b"))


async def test_delete_reaches_the_live_owner_and_the_id_starts_afresh(
    pg_url: str, pg_schema: str
) -> None:
    """Item 10: ``ops.delete`` of a terminated actor whose owner runs: the owner drops its
    cell and its lease, and the id registered again from seq 1 is a new actor, for the
    owner's own asks and for a client's (it answered ``ActorFinishedError`` and appended its
    refusals into the new log)."""
    async with _runtime(pg_url, pg_schema, "r") as owner:
        ref = await owner.spawn(Gated, "d")
        assert await ref.ask(Work("a")) == 1
        await owner.terminate("d", reason="retired", by="ops")
        async with ops.opened(_schema_url(pg_url, pg_schema), read_only=False) as store:
            await ops.delete(store, "d", yes=True, by="ops", reason="gdpr")
            with anyio.fail_after(20):  # the owner let go of the lease
                while (lease := await store.get_lease("d")) is not None and lease[0] == "r":  # type: ignore[attr-defined]
                    await anyio.sleep(0.05)
        assert await owner.ref(Gated, "d").ask(Work("again"), timeout=30) == 1
        async with ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True) as client:
            assert await client.ref(Gated, "d").ask(Work("client"), timeout=30) == 2
        rows = await owner.store.read("d")
        assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
        assert all(r.kind != "step" or b"ActorFinishedError" not in r.payload for r in rows)
        report = await ops.verify(owner.store)
        assert report.findings == [], report.findings


def _schema_url(url: str, schema: str) -> str:
    from tests import _pg

    return _pg.schema_url(url, schema)


async def test_system_terminate_from_another_runtime_reaches_the_owner(
    pg_url: str, pg_schema: str
) -> None:
    """A sibling of items 10 and 11: ``system.terminate`` called on a runtime that does not
    own the actor (a client) recorded the event but never told the owner, which went on
    running steps."""
    async with _runtime(pg_url, pg_schema, "r") as owner:
        ref = await owner.spawn(Gated, "o")
        assert await ref.ask(Work("a")) == 1
        async with ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True) as client:
            await client.terminate("o", reason="from afar", by="ops")
            cell = owner._cells["o"]
            with anyio.fail_after(20):
                while cell.ended is None:
                    await anyio.sleep(0.02)
            assert owner.status("o") == "terminated"
            with pytest.raises(ActorFinishedError, match="from afar"):
                await client.ref(Gated, "o").ask(Work("b"), timeout=30)


async def test_a_client_ask_to_a_quarantined_actor_gets_the_typed_error(
    pg_url: str, pg_schema: str
) -> None:
    """Item 9 (PostgreSQL): an owner keeps a quarantined actor's lease and never takes in its
    inbox; a client's ask got no answer and timed out. It gets ``ActorQuarantinedError``
    (the message stays queued for after the operator's repair)."""
    import asyncpg
    from actorlog import ActorQuarantinedError

    async with _runtime(pg_url, pg_schema, "r") as owner:
        assert await (await owner.spawn(Gated, "q")).ask(Work("a")) == 1
    conn = await asyncpg.connect(pg_url)
    try:  # one flipped byte in the first entry: its checksum fails
        await conn.execute(
            f'UPDATE "{pg_schema}".entries SET payload = overlay(payload placing '
            "'X'::bytea from 2 for 1) WHERE actor_id = 'q' AND seq = 1"
        )
    finally:
        await conn.close()
    async with _runtime(pg_url, pg_schema, "r") as owner:
        with pytest.raises(ActorlogError):
            await owner.spawn(Gated, "q")  # quarantined here, its lease kept
        assert owner.status("q") == "quarantined"
        async with ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True) as client:
            with pytest.raises(ActorQuarantinedError):
                await client.ref(Gated, "q").ask(Work("b"), message_id="c-q", timeout=30)
