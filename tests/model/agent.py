"""The one actor class and the tools the model test drives (public API only)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import attrs
import sniffio
from actorlog import Actor, Context, Retry, Tool, ToolCallError, tool

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
        #: what each execution of a retried tool does, per tag, in order: "fail", "hang"
        #: (until the system restarts) or "ok" (the default once the plan is used up)
        self.attempts: dict[str, list[str]] = {}
        #: how many executions of a retried tool hung, per tag
        self.hung: Counter[str] = Counter()
        #: tags whose hanging call may return (it polls: set from any thread)
        self.released: set[str] = set()
        #: called by a concurrent step's tool when it starts, with its call id (the
        #: "tool started" crash point of the concurrency model: it may block forever)
        self.on_start: Callable[[str], Awaitable[None]] | None = None

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]  # reuse the initializer to reset state

    async def maybe_hang(self, tag: str) -> None:
        if tag in self.armed:
            self.armed.discard(tag)
            event = self.hanging.setdefault(tag, anyio.Event())
            event.set()
            while tag not in self.released:
                await anyio.sleep(0.005)

    async def attempt(self, tag: str) -> None:
        """One execution of a retried tool: fail, hang or return as planned."""
        plan = self.attempts.setdefault(tag, [])
        what = plan.pop(0) if plan else "ok"
        if what == "fail":
            raise RetryableError(f"attempt failed {tag}")
        if what == "hang":
            self.hung[tag] += 1
            await anyio.sleep_forever()


WORLD = World()


class RetryableError(Exception):
    """What a retried tool's planned failure raises."""


#: no delay between attempts: the model is about what is logged, not about time
RETRY = Retry(attempts=4, initial=0.0, jitter=False, on=RetryableError)


@tool(effect="read", retry=RETRY)
async def t_retry_read(tag: str) -> str:
    WORLD.runs.append(("retry_read", tag))
    await WORLD.attempt(tag)
    return f"rt:{tag}"


@tool(effect="write", idempotent=True, retry=RETRY)
async def t_retry_idem(tag: str, *, idempotency_key: str) -> str:
    WORLD.runs.append(("retry_idem", tag))
    WORLD.keys.append((tag, idempotency_key))
    await WORLD.attempt(tag)
    return f"rt:{tag}"


RETRY_TOOLS: dict[str, Tool[..., str]] = {"retry_read": t_retry_read, "retry_idem": t_retry_idem}


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


# -- concurrent effects inside one step (issue 25) --------------------------------------------


async def _started(call: str, ms: int) -> None:
    """A concurrent step's tool: the crash hook, then its latency (chosen by the test, so
    the calls of a step finish in a different order from one example to the next)."""
    if WORLD.on_start is not None:
        await WORLD.on_start(call)
    await anyio.sleep(ms / 1000)


@tool(effect="read")
async def t_slow_read(tag: str, call: str, ms: int) -> str:
    WORLD.runs.append(("slow_read", f"{tag}/{call}"))
    await _started(f"{tag}/{call}", ms)
    return call


@tool(effect="write", idempotent=True)
async def t_slow_write(tag: str, call: str, ms: int, *, idempotency_key: str) -> str:
    WORLD.runs.append(("slow_write", f"{tag}/{call}"))
    WORLD.keys.append((tag, idempotency_key))
    await _started(f"{tag}/{call}", ms)
    return call.upper()


@tool(effect="write")
async def t_slow_pay(tag: str, call: str, ms: int) -> str:
    """A plain write (it escalates when in doubt): in doubt after a crash, the recovered
    step waits for an operator until the handler's deadline cancels it."""
    WORLD.runs.append(("slow_pay", f"{tag}/{call}"))
    await _started(f"{tag}/{call}", ms)
    return call.upper()


#: the shapes of a concurrent step (``Op(kind="conc", arg="<shape>:<ms>,<ms>,...")``);
#: ``race``, ``timeout`` and ``paydeadline`` end by timing (their reply is predicted from
#: the log)
CONC_SHAPES = ("fanout", "nested", "native", "race", "timeout", "paydeadline")
#: the deadline of the ``timeout`` shape's call (``anyio.move_on_after``)
TIMEOUT_AFTER = 0.03


async def _concurrent(ctx: Context, tag: str, arg: str) -> str:
    """Structured concurrency inside a step: every effect from a task of a task group."""
    shape, _, rest = arg.partition(":")
    lat = [int(x) for x in rest.split(",") if x] or [0]

    def ms(i: int) -> int:
        return lat[i % len(lat)]

    out: dict[Any, str] = {}
    if shape == "fanout":  # N tasks, each a read and a write that depends on it

        async def pair(i: int) -> None:
            first = await ctx.call(t_slow_read, tag, f"{i}a", ms(2 * i))
            out[i] = await ctx.call(t_slow_write, tag, f"{i}b-{first}", ms(2 * i + 1))

        async with anyio.create_task_group() as tg:
            for i in range(max(2, len(lat) // 2)):
                tg.start_soon(pair, i)
        return "fan:" + ",".join(out[k] for k in sorted(out))
    if shape == "nested":  # a group of groups, each then a write of its own

        async def leaf(i: int, j: int) -> None:
            out[(i, j)] = await ctx.call(t_slow_read, tag, f"{i}.{j}", ms(2 * i + j))

        async def branch(i: int) -> None:
            async with anyio.create_task_group() as inner:
                for j in range(2):
                    inner.start_soon(leaf, i, j)
            out[(i, 9)] = await ctx.call(t_slow_write, tag, f"{i}.end", ms(i + 1))

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(branch, i)
        return "nest:" + ",".join(out[k] for k in sorted(out))
    if shape == "native":  # the event loop's own: asyncio.gather and TaskGroup, trio nursery
        return "native:" + ",".join(await _native(ctx, tag, ms))
    if shape == "race":  # the first to return wins and cancels the others
        won: list[str] = []

        async def contestant(i: int) -> None:
            got = await ctx.call(t_slow_read, tag, f"r{i}", ms(i))
            if not won:
                won.append(got)
                tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            for i in range(max(2, len(lat))):
                tg.start_soon(contestant, i)
        return "won:" + won[0]
    if shape == "timeout":  # a deadline around a call
        with anyio.move_on_after(TIMEOUT_AFTER):
            return "in time:" + await ctx.call(t_slow_read, tag, "t", ms(0))
        return "timed out"
    if shape == "paydeadline":  # a deadline around a write that escalates when in doubt
        with anyio.move_on_after(TIMEOUT_AFTER):
            return "in time:" + await ctx.call(t_slow_pay, tag, "p", ms(0))
        return "timed out"
    raise AssertionError(shape)


async def _native(ctx: Context, tag: str, ms: Callable[[int], int]) -> list[str]:
    if sniffio.current_async_library() == "trio":
        import trio

        got: dict[int, str] = {}

        async def one(i: int) -> None:
            got[i] = await ctx.call(t_slow_read, tag, f"n{i}", ms(i))

        async with trio.open_nursery() as nursery:
            for i in range(3):
                nursery.start_soon(one, i)
        return [got[i] for i in range(3)]
    gathered = await asyncio.gather(*(ctx.call(t_slow_read, tag, f"g{i}", ms(i)) for i in range(3)))
    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(ctx.call(t_slow_write, tag, f"t{i}", ms(i + 3))) for i in range(2)]
    return [*gathered, *(t.result() for t in tasks)]


async def _hang_among_others(ctx: Context, hang: Tool[..., str], tag: str) -> str:
    """A hanging call from a task of a group whose other tasks make calls of their own
    (which finish): the reply is the hanging call's, as when it is made alone."""
    got: list[str] = []
    failed: list[ToolCallError] = []

    async def hanging() -> None:
        try:
            got.append(await ctx.call(hang, tag))
        except ToolCallError as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ctx.call, t_slow_read, tag, "x0", 0)
        tg.start_soon(hanging)
        tg.start_soon(ctx.call, t_slow_read, tag, "x1", 5)
    if failed:
        raise failed[0]
    return got[0]


HANG_TOOLS: dict[str, Tool[..., str]] = {
    "hang_read": t_hang_read,
    "hang_idem": t_hang_idem,
    "hang_escalate": t_hang_escalate,
}


def make_agent(version: int) -> type[Actor[AgentState]]:
    """The model's actor class, version ``version``: what an ``importlib.reload`` of a
    module with a fixed class gives (a new class object with the same module, qualified
    name and stable name). Versions behave the same but for the ``which`` message."""

    class Agent(Actor[AgentState], name="model.agent"):
        __qualname__ = "Agent"
        snapshot_every = None

        async def receive(self, ctx: Context, msg: Op | Peek) -> Any:
            return await _receive(self, ctx, msg, version)

    return Agent


#: version 1, the class the model starts with
Agent = make_agent(1)


async def _receive(actor: Actor[AgentState], ctx: Context, msg: Op | Peek, version: int) -> Any:
    state = actor.state
    if isinstance(msg, Peek):
        return "|".join(state.log)
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
        ref = await ctx.spawn(type(actor), msg.arg)
        await ctx.send(ref, Op(f"{msg.tag}>", "plain"))
        out = "sent"
    elif kind in HANG_TOOLS:
        try:
            if msg.arg == "conc":  # the hanging call made next to two others, in a task group
                out = await _hang_among_others(ctx, HANG_TOOLS[kind], msg.tag)
            else:
                out = await ctx.call(HANG_TOOLS[kind], msg.tag)
        except ToolCallError as exc:
            out = f"failed:{exc.message}"
    elif kind in RETRY_TOOLS:
        try:
            out = await ctx.call(RETRY_TOOLS[kind], msg.tag)
        except ToolCallError as exc:
            out = f"failed:{exc.error_type}"
    elif kind == "conc":
        out = await _concurrent(ctx, msg.tag, msg.arg)
    elif kind == "stop":
        ctx.stop(f"asked by {msg.tag}")
        out = "stopping"
    elif kind == "which":
        return f"v{version}"  # no state change: which class version handles messages
    elif kind == "alias":
        # the reply is the state's own list: a caller must not be able to change state
        state.log.append(f"{msg.tag}=alias")
        return state.log
    else:
        raise AssertionError(kind)
    state.log.append(f"{msg.tag}={out}")
    return out
