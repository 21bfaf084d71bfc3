"""A failed ``ctx.send`` / ``ctx.spawn`` is an error of that effect, never quarantine of the
sender (issue 18.1).

The sender's own log is intact: the failure is recorded in it, the handler may catch it, and
a restart replays it as recorded (the interrupted delivery is not retried inside a completed
step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from actorlog import (
    Actor,
    ActorlogError,
    ActorRef,
    ActorSystem,
    Context,
    ToolCallError,
)
from actorlog._journal.codec import MAX_PAYLOAD_BYTES, make_row, type_tag
from actorlog.store import Store
from actorlog.stores import MemoryStore

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]
REFS: dict[str, ActorRef[Any]] = {}


@attrs.define
class Go:
    how: str


@attrs.define
class Note:
    text: str = "hi"


@attrs.define
class Errors:
    seen: list[str] = attrs.Factory(list)


class Receiver(Actor[Errors]):
    async def receive(self, ctx: Context, msg: Note) -> str:
        return msg.text


class Another(Actor[Errors]):
    async def receive(self, ctx: Context, msg: Note) -> str:
        return "another"


class Sender(Actor[Errors]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> str:
        try:
            if msg.how == "send":
                await ctx.send(REFS["damaged"], Note())
            elif msg.how == "spawn":
                await ctx.spawn(Receiver, "taken")  # exists as Another
            elif msg.how == "unloggable":
                await ctx.send(REFS["healthy"], Note("lone \udcff"))
            elif msg.how == "oversize":
                await ctx.send(REFS["healthy"], Note("x" * (MAX_PAYLOAD_BYTES + 1)))
            else:
                await ctx.send(REFS["healthy"], Note())
        except ActorlogError as exc:
            kind = exc.error_type if isinstance(exc, ToolCallError) else ""
            self.state.seen.append(f"{type(exc).__name__}/{kind}")
            return f"caught {type(exc).__name__}/{kind}"
        return "delivered"


async def damage(make_store: StoreFactory, actor_id: str) -> None:
    """A receiver whose log holds one entry with a wrong checksum."""
    store = make_store()
    await store.open()
    try:
        await store.register_actor(actor_id, type_tag(Receiver))
        row = make_row(actor_id, 1, "message", type_tag(Note), 0, "x", b'{"body":{}}')
        await store.append(actor_id, 0, [attrs.evolve(row, checksum=row.checksum ^ 1)])
    finally:
        if not isinstance(store, MemoryStore):
            await store.close()


@pytest.mark.parametrize("how", ["send", "spawn"])
async def test_a_failed_delivery_is_the_effects_error_not_the_senders_quarantine(
    make_store: StoreFactory, how: str
) -> None:
    await damage(make_store, "damaged")
    async with ActorSystem(make_store(), actors=[Sender, Receiver, Another]) as system:
        REFS["damaged"] = system.ref(Receiver, "damaged")
        REFS["healthy"] = system.ref(Receiver, "healthy")
        await system.spawn(Another, "taken")
        sender = await system.spawn(Sender, "s")
        live = await sender.ask(Go(how), message_id="m1")
        assert live.startswith("caught ")
        assert system.status("s") != "quarantined"
        assert await sender.ask(Go("healthy"), message_id="m2") == "delivered"
    async with ActorSystem(make_store(), actors=[Sender, Receiver, Another]) as system:
        REFS["healthy"] = system.ref(Receiver, "healthy")
        sender = await system.spawn(Sender, "s")
        assert system.status("s") != "quarantined"
        assert await sender.ask(Go(how), message_id="m1") == live
        assert await sender.ask(Go("healthy"), message_id="m3") == "delivered"
        healthy = await system.spawn(Receiver, "healthy")
        assert await healthy.ask(Note("again")) == "again"
    async with ActorSystem(make_store(), actors=[Sender, Receiver, Another]) as system:
        # the replayed state saw the same failure as the live one
        sender = await system.spawn(Sender, "s")
        assert sender is not None
        assert system.status("s") != "quarantined"


@pytest.mark.parametrize("how", ["unloggable", "oversize"])
async def test_a_message_ctx_send_cannot_log_is_refused_before_the_send_is_logged(
    make_store: StoreFactory, how: str
) -> None:
    """Bad input fails at the call and writes nothing: no send effect in the sender's log."""
    async with ActorSystem(make_store(), actors=[Sender, Receiver]) as system:
        REFS["healthy"] = system.ref(Receiver, "healthy")
        sender = await system.spawn(Sender, "s")
        assert await sender.ask(Go(how), message_id="m1") == "caught EncodeError/"
        assert system.status("s") != "quarantined"
    store = make_store()
    await store.open()
    try:
        kinds = [r.kind for r in await store.read("s")]
    finally:
        if not isinstance(store, MemoryStore):
            await store.close()
    assert kinds == ["message", "step"]
