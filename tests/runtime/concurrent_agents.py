"""Agents whose steps run effects concurrently (issue 25), shared by
tests/effects/test_concurrent_steps.py and its SIGKILL worker."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import attrs
from actorlog import Actor, Context, tool

#: the file the tools append "start ARG" / "done ARG" lines to, and the start to kill at
LEDGER: dict[str, Any] = {"path": None, "kill_at": 0, "starts": 0}


def _note(line: str) -> None:
    path = LEDGER["path"]
    if path is None:
        return
    with Path(path).open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@tool(effect="write", idempotent=True, name="conc.work")
async def work(arg: str, delay: float, *, idempotency_key: str) -> str:
    """A write that takes ``delay`` seconds; SIGKILLs its process at the chosen start."""
    _note(f"start {arg} {idempotency_key}")
    LEDGER["starts"] += 1
    if LEDGER["starts"] == LEDGER["kill_at"]:
        os.kill(os.getpid(), signal.SIGKILL)
    await anyio.sleep(delay)
    _note(f"done {arg} {idempotency_key}")
    return f"w-{arg}"


@attrs.define
class Fan:
    tasks: int = 4


@attrs.define
class Results:
    got: list[str] = attrs.Factory(list)


def delay_of(i: int, step: int) -> float:
    """A different finishing order than the starting order, different per call."""
    return 0.01 * ((3 * i + 2 * step) % 5)


class FanOut(Actor[Results]):
    """The issue's example: N tasks of a task group, each two dependent calls."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Fan) -> list[str]:
        got: list[str] = []

        async def one(i: int) -> None:
            a = await ctx.call(work, f"a{i}", delay_of(i, 0))
            b = await ctx.call(work, f"b{i}-" + a, delay_of(i, 1))
            got.append(b)

        async with anyio.create_task_group() as tg:
            for i in range(msg.tasks):
                tg.start_soon(one, i)
        self.state.got.extend(sorted(got))
        return sorted(got)


def expected(tasks: int = 4) -> list[str]:
    return sorted(f"w-b{i}-w-a{i}" for i in range(tasks))


@tool(effect="read", name="conc.slow")
async def slow(name: str, delay: float) -> str:
    await anyio.sleep(delay)
    return name


@attrs.define
class Go:
    kind: str


class Races(Actor[Results]):
    """Handlers whose path depends on which concurrent call finished first."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> list[str]:
        order: list[str] = []
        if msg.kind == "order":  # the order results arrived in
            async with anyio.create_task_group() as tg:
                for name, delay in (("a", 0.15), ("b", 0.01), ("c", 0.08)):
                    tg.start_soon(self._into, ctx, order, name, delay)
        elif msg.kind == "first":  # the first finisher cancels the others
            async with anyio.create_task_group() as tg:

                async def run(name: str, delay: float) -> None:
                    order.append(await ctx.call(slow, name, delay))
                    tg.cancel_scope.cancel()

                tg.start_soon(run, "slow", 5.0)
                tg.start_soon(run, "fast", 0.01)
            order.append(await ctx.call(slow, "after", 0.0))
        elif msg.kind == "deadline":  # a deadline around a call, then another call
            with anyio.move_on_after(0.05):
                order.append(await ctx.call(slow, "late", 5.0))
            order.append(await ctx.call(slow, "next", 0.0))
        elif msg.kind == "nested":  # groups in groups
            async with anyio.create_task_group() as tg:
                for outer in range(2):
                    tg.start_soon(self._group, ctx, order, outer)
        elif msg.kind == "sleep":  # a durable sleep racing two calls
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._nap, ctx, order)
                tg.start_soon(self._into, ctx, order, "s", 0.01)
                tg.start_soon(self._into, ctx, order, "t", 0.3)
        order.append(str(ctx.uuid()))
        self.state.got.extend(order)
        return order

    async def _into(self, ctx: Context, order: list[str], name: str, delay: float) -> None:
        order.append(await ctx.call(slow, name, delay))

    async def _nap(self, ctx: Context, order: list[str]) -> None:
        await ctx.sleep(0.1)
        order.append("slept")

    async def _group(self, ctx: Context, order: list[str], outer: int) -> None:
        first = await ctx.call(slow, f"o{outer}", 0.02 * (2 - outer))
        async with anyio.create_task_group() as tg:
            for inner in range(2):
                tg.start_soon(self._into, ctx, order, f"{first}-i{inner}", 0.01 * (2 - inner))


class AsyncioShapes(Actor[Results]):
    """asyncio's own combinators (asyncio only)."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> list[str]:
        import asyncio

        order: list[str] = []
        if msg.kind == "gather":
            got = await asyncio.gather(
                ctx.call(slow, "g1", 0.05), ctx.call(slow, "g2", 0.01), ctx.call(slow, "g3", 0.03)
            )
            order += got
        elif msg.kind == "taskgroup":
            async with asyncio.TaskGroup() as tg:
                for name, delay in (("t1", 0.04), ("t2", 0.01)):
                    tg.create_task(self._into(ctx, order, name, delay))
        elif msg.kind == "wait":
            a = asyncio.ensure_future(ctx.call(slow, "w-slow", 5.0))
            b = asyncio.ensure_future(ctx.call(slow, "w-fast", 0.01))
            done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            order += [t.result() for t in done]
            order.append(await ctx.call(slow, "after", 0.0))
        self.state.got.extend(order)
        return order

    async def _into(self, ctx: Context, order: list[str], name: str, delay: float) -> None:
        order.append(await ctx.call(slow, name, delay))


class Misuse(Actor[Results]):
    """Effects that cannot be durable: refused at the call."""

    snapshot_every = None
    kept: Context | None = None

    async def receive(self, ctx: Context, msg: Go) -> str:
        try:
            if msg.kind == "thread":
                await anyio.to_thread.run_sync(ctx.now)
            elif msg.kind == "keep":
                Misuse.kept = ctx
                return "kept"
            elif msg.kind == "stale":
                assert Misuse.kept is not None
                Misuse.kept.now()
        except Exception as exc:  # the refusal, as the handler sees it
            return f"{type(exc).__name__}: {exc}"
        return "no error"


#: what Fickle's task 1 does on this run: "call" (as live), "skip" (ends without it),
#: "other" (asks for another call)
FICKLE = {"task1": "call"}


class Fickle(Actor[Results]):
    """Two tasks; task 1 can be made to take another path on replay."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> list[str]:
        got: list[str] = []

        async def zero() -> None:
            got.append(await ctx.call(slow, "z", 0.0))
            got.append(await ctx.call(slow, "z2", 0.3))

        async def one() -> None:
            if FICKLE["task1"] == "call":
                got.append(await ctx.call(slow, "o", 0.05))
            elif FICKLE["task1"] == "other":
                got.append(await ctx.call(slow, "not-o", 0.05))

        async with anyio.create_task_group() as tg:
            tg.start_soon(zero)
            tg.start_soon(one)
        self.state.got.extend(got)
        return got
