"""An agent whose step ran effects in a task it spawned, as recorded before [F18] (FORMAT.md):
the fixture ``fixtures/fan_before_tasks.jsonl`` was written by actorlog 49148f5, where every
effect of a step took the next number of one sequence (tests/upgrading/make_fan_fixture.py)."""

from __future__ import annotations

import anyio
import attrs
from actorlog import Actor, Context, message, tool


@tool(effect="read", name="old.lookup")
async def lookup(q: str) -> str:
    return "found-" + q


@message(name="old.Ask")
@attrs.define
class Ask:
    q: str


@message(name="old.Notes")
@attrs.define
class Notes:
    got: list[str] = attrs.Factory(list)


class OldFan(Actor[Notes], name="old.fan"):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Ask) -> list[str]:
        got: list[str] = []

        async def one() -> None:
            a = await ctx.call(lookup, msg.q)
            got.append(await ctx.call(lookup, a))

        got.append(await ctx.call(lookup, "first"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(one)
        got.append(str(ctx.now().year > 2000))
        self.state.got.extend(got)
        return got
