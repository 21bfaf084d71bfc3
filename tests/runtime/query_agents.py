"""Actors for the read-only query tests (tests/runtime/test_query.py, tests/cluster)."""

from __future__ import annotations

import anyio
import attrs
from actorlog import Actor, ActorRef, Context, message, tool

#: tool runs, in order
RUNS: list[str] = []
#: while set, a ``Slow`` step waits for it between its two changes
GATES: dict[str, anyio.Event] = {}
STARTED: dict[str, anyio.Event] = {}


@message(name="query.add")
@attrs.frozen
class Add:
    item: str


@message(name="query.slow")
@attrs.frozen
class Slow:
    first: str
    second: str


@message(name="query.hold")
@attrs.frozen
class Hold:
    item: str


@message(name="query.peek_other")
@attrs.frozen
class PeekOther:
    other: str


@message(name="query.last")
@attrs.frozen
class Last:
    n: int


@message(name="query.tamper")
@attrs.frozen
class Tamper:
    how: str  # "append" | "tool" | "send"


@message(name="query.stop")
@attrs.frozen
class Stop:
    why: str


@attrs.define
class Items:
    items: list[str] = attrs.Factory(list)


@tool(effect="read", name="query.lookup")
async def lookup(item: str) -> str:
    RUNS.append(item)
    return item.upper()


@tool(effect="read", name="query.held")
async def held(item: str) -> str:
    STARTED.setdefault(item, anyio.Event()).set()
    await GATES[item].wait()
    return item


class Keeper(Actor[Items], name="query.keeper"):
    async def receive(self, ctx: Context, msg: Add | Slow | Hold | PeekOther | Stop) -> int:
        if isinstance(msg, Hold):  # a step that waits inside a tool call
            self.state.items.append(msg.item)
            self.state.items.append(await ctx.call(held, msg.item))
        elif isinstance(msg, Stop):
            ctx.stop(msg.why)
        elif isinstance(msg, Add):
            self.state.items.append(await ctx.call(lookup, msg.item))
        elif isinstance(msg, Slow):
            self.state.items.append(msg.first)
            STARTED.setdefault(msg.first, anyio.Event()).set()
            await GATES[msg.first].wait()  # a query meanwhile must not see half of this step
            self.state.items.append(msg.second)
        else:
            other = await ctx.spawn(Keeper, msg.other)
            await other.query(lambda s: len(s.items))  # refused: its answer is not logged
        return len(self.state.items)

    async def on_query(self, q: Last | Tamper) -> list[str]:
        if isinstance(q, Last):
            return self.state.items[-q.n :]
        if q.how == "append":
            self.state.items.append("sneaky")
        elif q.how == "tool":
            await lookup("sneaky")
        elif q.how == "send":
            await SELF_REFS[self.actor_id].send(Add("sneaky"))
        return []


#: refs the ``send`` tamper uses (a query has no context)
SELF_REFS: dict[str, ActorRef[Keeper]] = {}


class Plain(Actor[Items], name="query.plain"):
    """No ``on_query``: it answers functions of its state only."""

    async def receive(self, ctx: Context, msg: Add) -> int:
        self.state.items.append(msg.item)
        return len(self.state.items)
