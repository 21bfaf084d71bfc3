"""Agents the console tests run: a chatty one for live pages, a hostile one for escaping."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, ops, tool
from actorlog.store import Store
from actorlog.stores import SqliteStore

#: markup, quotes, an HTML entity, a bidi override, emoji and a very long tail
HOSTILE_TEXT = (
    '<script>alert("xss")</script><img src=x onerror=alert(1)> "\' &amp; '
    "\u202egnp.exe ünïcødé 😀 " + "L" * 5000
)

#: actor ids a web page must show as text: markup, quotes, unicode, very long
HOSTILE_IDS = (
    '<script>alert("id")</script>',
    "\"quoted' & <b>bold</b>",
    "ünï\u202ecødé-😀",
    "long-" + "x" * 190,
)


@attrs.define
class Say:
    text: str


@attrs.define
class Lines:
    said: list[str] = attrs.Factory(list)


@tool(effect="read", name="echo<tool>")
async def echo(text: str) -> str:
    return f"<echo>{text}</echo>"


class Chat(Actor[Lines]):
    async def receive(self, ctx: Context, msg: Say) -> str:
        said = await ctx.call(echo, msg.text[:100])
        self.state.said.append(said)
        return said


class Spiky(Actor[Lines]):
    """Replies with what it was sent; raises an error carrying hostile text on ``raise``."""

    async def receive(self, ctx: Context, msg: Say) -> str:
        said = await ctx.call(echo, msg.text)
        if msg.text == "raise":
            raise ValueError(HOSTILE_TEXT)
        self.state.said.append(said)
        return said


@attrs.define
class Pay:
    to: str
    amount: int


@tool(effect="write", name="web.transfer")
async def transfer(to: str, amount: int) -> str:
    await anyio.sleep_forever()  # cancelled by the handler's deadline while it runs
    return to


class Payer(Actor[Lines], name="web.Payer"):
    """Pays in a task of its step, under a deadline that cancels the transfer while it runs:
    the step goes on and the transfer (a write that escalates) waits for a ruling."""

    async def receive(self, ctx: Context, msg: Pay) -> str:
        async def pay() -> None:
            with anyio.move_on_after(0.2):
                await ctx.call(transfer, msg.to, msg.amount)

        async with anyio.create_task_group() as tg:
            tg.start_soon(pay)
        self.state.said.append(msg.to)
        return "went on"


async def cancelled_write(store: Store, actor_id: str = "payer-1") -> int:
    """Run ``Payer`` once on ``store``: the intent seq of its transfer, needing a ruling."""
    async with ActorSystem(store, actors=[Payer]) as system:
        ref = await system.spawn(Payer, actor_id)
        assert await ref.ask(Pay("acme", 120), message_id=f"{actor_id}-pay") == "went on"
        (call,) = await ops.calls_needing_ruling(system.store, actor_id)
        with anyio.fail_after(10):  # the runtime's in_doubt event, recorded in the background
            while not await system.store.read_events(actor_id):
                await anyio.sleep(0.01)
    return call.intent_seq


def make_cancelled_write(db: Path, actor_id: str = "payer-1") -> int:
    """:func:`cancelled_write` on the SQLite file ``db``."""
    return anyio.run(cancelled_write, SqliteStore(db), actor_id, backend="asyncio")
