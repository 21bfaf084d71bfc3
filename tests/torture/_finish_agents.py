"""The actor of the finish crash test (``finish_worker.py`` runs it)."""

from __future__ import annotations

import attrs
from actorlog import Actor, Context, tool

MARKS = [""]


@attrs.frozen
class Mark:
    pass


@attrs.frozen
class Finish:
    why: str


@attrs.define
class Count:
    n: int = 0


@tool(effect="write")
async def mark(n: int) -> int:
    with open(MARKS[0], "a", encoding="utf-8") as f:  # noqa: ASYNC230  # tiny local file
        f.write(f"{n}\n")
    return n


class Finisher(Actor[Count]):
    def initial_state(self) -> Count:
        return Count()

    async def receive(self, ctx: Context, msg: Mark | Finish) -> int:
        self.state.n += 1
        if isinstance(msg, Mark):
            await ctx.call(mark, self.state.n)
        else:
            ctx.stop(msg.why)
        return self.state.n
