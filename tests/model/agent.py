"""The one actor class and the tools the model test drives (public API only)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import attrs
from actorlog import Actor, Context, Tool, ToolCallError, tool

#: a message over the 8 MiB per-entry limit once encoded
OVERSIZE = 9 * 1024 * 1024


@attrs.define
class Op:
    """One step. ``kind`` picks what the handler does; ``tag`` names it in the state."""

    tag: str
    kind: str
    arg: str = ""


@attrs.define
class Peek:
    """Reply with the whole state as one string (no state change)."""


@attrs.define
class AgentState:
    log: list[str] = attrs.Factory(list)


class World:
    """The outside world of the tools: which calls hang, which ran (across restarts)."""

    def __init__(self) -> None:
        self.armed: set[str] = set()  # tags whose next hanging-tool call blocks forever
        self.hanging: dict[str, anyio.Event] = {}  # set when that call is blocked
        self.runs: list[tuple[str, str]] = []  # (tool, tag) of every execution
        #: (tag, idempotency key) of every execution of an idempotent write
        self.keys: list[tuple[str, str]] = []

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]  # reuse the initializer to reset state

    async def maybe_hang(self, tag: str) -> None:
        if tag in self.armed:
            self.armed.discard(tag)
            event = self.hanging.setdefault(tag, anyio.Event())
            event.set()
            await anyio.sleep_forever()


WORLD = World()


@tool(effect="read")
async def t_read(tag: str) -> str:
    WORLD.runs.append(("read", tag))
    return f"r:{tag}"


@tool(effect="write", idempotent=True)
async def t_write(tag: str, *, idempotency_key: str) -> str:
    WORLD.runs.append(("write", tag))
    WORLD.keys.append((tag, idempotency_key))
    return f"w:{tag}"


async def _raise(how: str) -> None:
    if how == "plain":
        raise RuntimeError("no luck")
    if how == "surrogate":
        # a body decoded with surrogateescape: not valid UTF-8
        raise RuntimeError("bad body \udcff")
    if how == "oversize":
        raise RuntimeError("x" * OVERSIZE)
    if how == "cancel":
        # a cancellation the runtime did not ask for: a future someone else cancelled
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.cancel()
        await fut
    if how == "genexit":
        raise GeneratorExit
    raise AssertionError(how)


@tool(effect="read")
async def t_raise_read(tag: str, how: str) -> str:
    WORLD.runs.append(("raise_read", tag))
    await _raise(how)
    return "unreachable"


@tool(effect="write")
async def t_raise_escalate(tag: str, how: str) -> str:
    WORLD.runs.append(("raise_escalate", tag))
    await _raise(how)
    return "unreachable"


def _shape(shape: str) -> Any:
    if shape == "int_keys":
        return {1: "a", 2: "b"}
    if shape == "tuple":
        return (1, "a")
    if shape == "nested":
        return {"k": [(1, 2), {3: None}]}
    return {"plain": [1, 2.5, "s", None, True]}


@tool(effect="read")
async def t_value(tag: str, shape: str) -> Any:
    WORLD.runs.append(("value", tag))
    return _shape(shape)


@tool(effect="read")
async def t_hang_read(tag: str) -> str:
    WORLD.runs.append(("hang_read", tag))
    await WORLD.maybe_hang(tag)
    return f"h:{tag}"


@tool(effect="write", idempotent=True)
async def t_hang_idem(tag: str, *, idempotency_key: str) -> str:
    WORLD.runs.append(("hang_idem", tag))
    WORLD.keys.append((tag, idempotency_key))
    await WORLD.maybe_hang(tag)
    return f"h:{tag}"


@tool(effect="write")
async def t_hang_escalate(tag: str) -> str:
    WORLD.runs.append(("hang_escalate", tag))
    await WORLD.maybe_hang(tag)
    return f"h:{tag}"


HANG_TOOLS: dict[str, Tool[..., str]] = {
    "hang_read": t_hang_read,
    "hang_idem": t_hang_idem,
    "hang_escalate": t_hang_escalate,
}


class Agent(Actor[AgentState]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Op | Peek) -> Any:
        if isinstance(msg, Peek):
            return "|".join(self.state.log)
        kind = msg.kind
        out: str
        if kind == "plain":
            out = "ok"
        elif kind == "boom":
            raise ValueError(f"boom {msg.tag}")
        elif kind == "read":
            out = await ctx.call(t_read, msg.tag)
        elif kind == "write":
            out = await ctx.call(t_write, msg.tag)
        elif kind in ("raise_read", "raise_escalate"):
            fn = t_raise_read if kind == "raise_read" else t_raise_escalate
            try:
                await ctx.call(fn, msg.tag, msg.arg)
                out = "no error"
            except ToolCallError as exc:
                out = f"err:{exc.error_type}"
        elif kind == "value":
            out = repr(await ctx.call(t_value, msg.tag, msg.arg))
        elif kind == "send":
            ref = await ctx.spawn(Agent, msg.arg)
            await ctx.send(ref, Op(f"{msg.tag}>", "plain"))
            out = "sent"
        elif kind in HANG_TOOLS:
            try:
                out = await ctx.call(HANG_TOOLS[kind], msg.tag)
            except ToolCallError as exc:
                out = f"failed:{exc.message}"
        elif kind == "alias":
            # the reply is the state's own list: a caller must not be able to change state
            self.state.log.append(f"{msg.tag}=alias")
            return self.state.log
        else:
            raise AssertionError(kind)
        self.state.log.append(f"{msg.tag}={out}")
        return out
