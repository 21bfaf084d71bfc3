"""The benchmark agent on actorlog: a small state, one tool, and the messages that drive it.

``Run(n)``: one step whose handler makes ``n`` sequential ``ctx.call``s (the shape of a DBOS
workflow or a LangGraph run). ``Step(i)``: one ``ctx.call`` per message (the actor shape:
snapshots apply between steps). ``Status()``: the number of tool results folded in so far.
``Grow(size)``: pad the state to about ``size`` bytes (for recovery with large states).

The tool is an idempotent write: after a crash in the middle of it, recovery runs it again with
the same idempotency key (the same at-least-once treatment as the peers give their steps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import attrs
from actorlog import Actor, Context, tool

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Agent", "AgentState", "Grow", "Run", "Status", "Step", "configure", "work"]


@attrs.define
class Run:
    n: int


@attrs.define
class Step:
    i: int


@attrs.define
class Status:
    pass


@attrs.define
class Grow:
    size: int


@attrs.define
class AgentState:
    count: int = 0
    total: int = 0
    last: str = ""
    pad: str = ""


def _default_impl(i: int) -> str:
    return f"value-{i:06d}"


_impl: Callable[[int], str] = _default_impl
_delay_s = 0.0


def configure(impl: Callable[[int], str] | None = None, delay_s: float = 0.0) -> None:
    """Set what the tool does (``impl(i)``) and how long it waits (``anyio.sleep``)."""
    global _impl, _delay_s
    _impl = impl or _default_impl
    _delay_s = delay_s


@tool(effect="write", idempotent=True, name="bench.work")
async def work(i: int, *, idempotency_key: str) -> str:
    value = _impl(i)
    if _delay_s:
        await anyio.sleep(_delay_s)  # a tool waiting on I/O
    return value


class Agent(Actor[AgentState]):
    async def receive(self, ctx: Context, msg: Run | Step | Status | Grow) -> int:
        if isinstance(msg, Status):
            return self.state.count
        if isinstance(msg, Grow):
            self.state.pad = "x" * msg.size
            return self.state.count
        if isinstance(msg, Run):
            for i in range(msg.n):
                self._fold(await ctx.call(work, i))
        else:
            self._fold(await ctx.call(work, msg.i))
        return self.state.total

    def _fold(self, value: str) -> None:
        self.state.count += 1
        self.state.total += len(value)
        self.state.last = value
