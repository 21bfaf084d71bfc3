"""A fan-out agent for the tracing tests of concurrent calls (issue 25): its handler starts
``WIDTH`` tasks in a task group, each making one ``meet`` call. ``meet`` returns only once
every call of the fan-out is running (a barrier), so the calls overlap by construction, not
by timing; with ``MEET.hang`` set it then hangs (what a SIGKILL mid fan-out leaves: every
intent logged, no result)."""

from __future__ import annotations

import anyio
import attrs
from actorlog import Actor, Context, tool

WIDTH = 3


@attrs.define
class Fan:
    name: str


@attrs.define
class Seen:
    replies: list[str] = attrs.Factory(list)


class Meeting:
    """The barrier, reset per test (and per process)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.arrived = 0
        self.all_here = anyio.Event()
        self.hang = False
        self.ran: list[int] = []

    async def meet(self, i: int) -> None:
        self.ran.append(i)
        self.arrived += 1
        if self.arrived % WIDTH == 0:
            self.all_here.set()
        await self.all_here.wait()
        if self.hang:
            await anyio.sleep_forever()


MEET = Meeting()


@tool(effect="read", name="meet")
async def meet(i: int) -> str:
    await MEET.meet(i)
    return f"met {i}"


class FanOut(Actor[Seen]):
    async def receive(self, ctx: Context, msg: Fan) -> str:
        got: dict[int, str] = {}

        async def one(i: int) -> None:
            got[i] = await ctx.call(meet, i)

        async with anyio.create_task_group() as tg:
            for i in range(WIDTH):
                tg.start_soon(one, i)
        reply = ", ".join(got[i] for i in range(WIDTH))
        self.state.replies.append(reply)
        return reply
