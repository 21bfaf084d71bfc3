"""The actor the lifecycle CLI tests end, cancel and delete (shared with
``lifecycle_worker.py``, which runs it in another process)."""

from __future__ import annotations

import anyio
import attrs
from actorlog import Actor, Context, tool


@attrs.frozen
class Work:
    text: str


@attrs.frozen
class Slow:
    seconds: float


@attrs.frozen
class Done:
    why: str


@attrs.define
class Count:
    n: int = 0


@tool(effect="write")
async def long_write(seconds: float) -> str:
    """A write tool that blocks: it prints ``in-tool`` once its intent is durable."""
    print("in-tool", flush=True)
    await anyio.sleep(seconds)
    return "wrote"


class Job(Actor[Count]):
    def initial_state(self) -> Count:
        return Count()

    async def receive(self, ctx: Context, msg: Work | Slow | Done) -> int:
        self.state.n += 1
        if isinstance(msg, Slow):
            await ctx.call(long_write, msg.seconds)
        elif isinstance(msg, Done):
            ctx.stop(msg.why)
        return self.state.n
