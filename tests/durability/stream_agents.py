"""Actors that emit events (``ctx.emit``), for the streaming tests and the crash worker."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
from actorlog import Actor, Context, tool


@attrs.define
class Tell:
    topic: str
    n: int = 3


@attrs.define
class Progress:
    stage: str
    done: int


@attrs.define
class Log:
    told: list[str] = attrs.Factory(list)


@tool(effect="read")
async def lookup(topic: str) -> str:
    return f"about {topic}"


class Narrator(Actor[Log]):
    """Emits ``start``, looks the topic up, emits ``n`` progress records, replies."""

    async def receive(self, ctx: Context, msg: Tell) -> str:
        ctx.emit("start")
        found = await ctx.call(lookup, msg.topic)
        for i in range(msg.n):
            ctx.emit(Progress(found, i))
        self.state.told.append(found)
        return f"told {msg.n}"


class Quiet(Actor[Log]):
    """Emits nothing."""

    async def receive(self, ctx: Context, msg: Tell) -> str:
        return await ctx.call(lookup, msg.topic)


#: the marks file and flag of the crash worker's gated tool (set by ``crash_worker``)
GATE: dict[str, Path] = {}


@tool(effect="read")
async def slow_part(topic: str) -> str:
    """Marks that it runs; then, until the flag file exists, waits (the kill comes here)."""
    marks, flag = GATE["marks"], GATE["flag"]
    with marks.open("a") as f:
        f.write("slow\n")
    while not flag.exists():
        await anyio.sleep(0.01)
    return f"slow {topic}"


class Resumable(Actor[Log]):
    """Emits around a quick read and a slow read: the crash test kills it in the slow one."""

    async def receive(self, ctx: Context, msg: Tell) -> str:
        ctx.emit("a")
        found = await ctx.call(lookup, msg.topic)
        ctx.emit(f"b {found}")
        slow = await ctx.call(slow_part, msg.topic)
        ctx.emit(f"c {slow}")
        return "resumed"
