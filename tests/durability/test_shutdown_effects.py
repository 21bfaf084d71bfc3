"""A clean shutdown never quarantines: a step that reaches ``ctx.send`` / ``ctx.spawn`` /
``ctx.send_later`` while its system closes (a slow tool finishing inside the shutdown grace)
stops, and resumes in the next runtime, its effect done once."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.store import Store

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]

#: the gate the slow tool waits on (one per test: events belong to their loop)
GATE: list[anyio.Event] = []
STARTED: list[anyio.Event] = []


@tool(effect="read", name="shutdown_effects.slow")
async def slow() -> str:
    STARTED[-1].set()
    await GATE[-1].wait()
    return "done"


@attrs.define
class Go:
    how: str  # send | spawn | send_later


@attrs.define
class Note:
    label: str


@attrs.define
class Get:
    pass


@attrs.define
class Log:
    items: list[str] = attrs.Factory(list)


class Recorder(Actor[Log]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Note | Get) -> list[str]:
        if isinstance(msg, Note):
            self.state.items.append(msg.label)
        return list(self.state.items)


class Relay(Actor[Log]):
    """Calls the slow tool, then reaches another actor the way ``Go`` says."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go | Get) -> list[str]:
        if isinstance(msg, Go):
            if msg.how == "spawn":
                await ctx.call(slow)
                await ctx.spawn(Recorder, "rec")
            else:
                rec = await ctx.spawn(Recorder, "rec")
                await ctx.call(slow)
                if msg.how == "send":
                    await ctx.send(rec, Note("hello"))
                else:
                    await ctx.send_later(rec, Note("hello"), delay=0)
            self.state.items.append(msg.how)
        return list(self.state.items)


async def _open_when_closing(system: ActorSystem) -> None:
    while not system._closed:  # the system's exit has begun
        await anyio.sleep(0.01)
    GATE[-1].set()


@pytest.mark.parametrize("how", ["send", "spawn", "send_later"])
async def test_an_effect_reached_during_shutdown_stops_the_step_and_it_resumes(
    make_store: StoreFactory, how: str
) -> None:
    GATE.append(anyio.Event())
    STARTED.append(anyio.Event())
    async with anyio.create_task_group() as tg:
        async with ActorSystem(make_store(), actors=[Relay, Recorder]) as system:
            await system.ref(Relay, "r").send(Go(how))
            with anyio.fail_after(15):
                await STARTED[-1].wait()
            tg.start_soon(_open_when_closing, system)
        assert system.status("r") != "quarantined"
    store = make_store()
    await store.open()
    try:
        assert "quarantined" not in [e.kind for e in await store.read_events("r")]
    finally:
        await store.close()
    GATE.append(anyio.Event())
    GATE[-1].set()
    STARTED.append(anyio.Event())
    async with ActorSystem(make_store(), actors=[Relay, Recorder]) as system:
        with anyio.fail_after(15):
            assert await system.ref(Relay, "r").ask(Get()) == [how]
            if how != "spawn":
                rec = system.ref(Recorder, "rec")
                while await rec.ask(Get()) != ["hello"]:
                    await anyio.sleep(0.01)
        assert system.status("r") == "idle"
