"""Small in-process agents for the API tests (MemoryStore, PostgresStore)."""

from __future__ import annotations

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.store import Store

#: Names ``charge_card`` really ran with, in order.
ran: list[str] = []


@attrs.define
class Job:
    name: str


@attrs.define
class Log:
    done: list[str] = attrs.Factory(list)


@tool(effect="write", name="charge_card")
async def charge_card(name: str) -> str:
    """Not idempotent: after a crash mid-call it is in doubt and escalates."""
    ran.append(name)
    if name == "hang":
        await anyio.sleep_forever()
    return f"charged {name}"


class Biller(Actor[Log]):
    async def receive(self, ctx: Context, msg: Job) -> str:
        receipt = await ctx.call(charge_card, msg.name)
        self.state.done.append(receipt)
        if msg.name == "notify":
            auditor = await ctx.spawn(Auditor, "auditor")
            await ctx.send(auditor, Job("audit"))
        return receipt


class Auditor(Actor[Log]):
    async def receive(self, ctx: Context, msg: Job) -> str:
        self.state.done.append(msg.name)
        return msg.name


async def crash_mid_call(store: Store) -> None:
    """Stop the system while ``charge_card("hang")`` runs: its intent has no result."""
    async with ActorSystem(store, actors=[Biller, Auditor], shutdown_grace=0) as system:
        ref = await system.spawn(Biller, "bill-1")
        assert await ref.ask(Job("first"), message_id="m1") == "charged first"
        await ref.send(Job("hang"), message_id="m2")
        with anyio.fail_after(5):
            while "hang" not in ran:
                await anyio.sleep(0.01)
