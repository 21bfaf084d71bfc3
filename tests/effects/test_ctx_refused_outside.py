"""docs/classes.md, "Concurrency inside a step", as a user reads it (black box, real
SQLite files): a ``ctx`` effect from another thread, from a task actorlog did not see start
(one started by a tool, or by a task group outside the step), from a ``Context`` kept after
its step returned, or from inside a running tool is "refused at the call
(``ConfigurationError``, nothing logged, the message says what to do)", for every effect the
page lists; the actor goes on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import SqliteStore

EFFECTS = ["call", "send", "spawn", "sleep", "send_later", "now", "random", "uuid", "version"]
ORIGINS = ["thread", "stale", "outer_task", "tool", "tool_task"]


@attrs.frozen
class Try:
    effect: str
    origin: str


@attrs.frozen
class Ping:
    n: int


@attrs.define
class Empty:
    pass


@tool(effect="read")
async def noop() -> str:
    return "ok"


class Sink(Actor[Empty]):
    async def receive(self, ctx: Context, msg: Ping) -> int:
        return msg.n


#: what the test hands the actor: a task group outside any step, a Context kept
OUTER: dict[str, Any] = {}


def effect_of(ctx: Context, effect: str) -> Callable[[], Awaitable[Any]]:
    """The effect ``effect`` of ``ctx`` as an awaitable factory (sync ones wrapped)."""

    async def run() -> Any:
        target = OUTER["sink"]
        if effect == "call":
            return await ctx.call(noop)
        if effect == "send":
            return await ctx.send(target, Ping(1))
        if effect == "spawn":
            return await ctx.spawn(Sink, "spawned")
        if effect == "sleep":
            return await ctx.sleep(0.01)
        if effect == "send_later":
            return await ctx.send_later(target, Ping(2), delay=3600)
        if effect == "version":
            return ctx.version("change")
        return getattr(ctx, effect)()

    return run


async def outcome(run: Callable[[], Awaitable[Any]]) -> str:
    try:
        await run()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def in_thread(run: Callable[[], Awaitable[Any]]) -> str:
    """Run the effect from a worker thread (its awaitable driven to its first refusal)."""
    coro = outcome(run)
    try:
        coro.send(None)
    except StopIteration as done:
        return str(done.value)
    coro.close()
    return "suspended: not refused at the call"


#: the Context of the tool's step, for the "tool" origins (the tool reads it from here)
IN_TOOL: dict[str, Any] = {}


@tool(effect="read")
async def misuse(effect: str, spawn_task: bool) -> str:
    run = effect_of(IN_TOOL["ctx"], effect)
    if not spawn_task:
        return await outcome(run)
    got: list[str] = []

    async def task() -> None:
        got.append(await outcome(run))

    async with anyio.create_task_group() as tg:
        tg.start_soon(task)
    return got[0]


class Misuser(Actor[Empty]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Try) -> str:
        run = effect_of(ctx, msg.effect)
        if msg.origin == "thread":
            return await anyio.to_thread.run_sync(in_thread, run)
        if msg.origin == "stale":
            if "kept" not in OUTER:
                OUTER["kept"] = ctx
                return "kept"
            return await outcome(effect_of(OUTER["kept"], msg.effect))
        if msg.origin == "outer_task":  # a task started before the step, outside it
            send, receive = anyio.create_memory_object_stream[str](1)
            with receive:
                await OUTER["jobs"].send((run, send))
                return await receive.receive()
        IN_TOOL["ctx"] = ctx
        return await ctx.call(misuse, msg.effect, msg.origin == "tool_task")


async def _outer_worker(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Runs each effect handed to it: a task of the test, not of any step."""
    OUTER["jobs"], jobs = anyio.create_memory_object_stream[Any](1)
    task_status.started()
    with jobs:
        async for run, reply in jobs:
            with reply:
                await reply.send(await outcome(run))


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _counts(rows: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r.kind] = out.get(r.kind, 0) + 1
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("origin", ORIGINS)
async def test_an_effect_from_outside_the_step_is_refused_at_the_call(
    tmp_path: Path, origin: str
) -> None:
    OUTER.clear()
    store = SqliteStore(tmp_path / "a.db")
    got: dict[str, str] = {}
    async with ActorSystem(store, actors=[Misuser, Sink]) as system:
        OUTER["sink"] = await system.spawn(Sink, "sink")
        ref = await system.spawn(Misuser, "m")
        async with anyio.create_task_group() as tg:
            await tg.start(_outer_worker)
            if origin == "stale":
                assert await ref.ask(Try("now", origin), message_id="keep") == "kept"
            for effect in EFFECTS:
                before = await store.read("m")
                got[effect] = await ref.ask(Try(effect, origin), message_id=effect)
                after = await store.read("m")
                new = _counts(after[len(before) :])
                # the message, the step, and for a tool origin the tool's intent and result
                allowed = {"message": 1, "step": 1}
                if origin.startswith("tool"):
                    allowed |= {"intent": 1, "result": 1}
                assert new == allowed, (effect, new, got[effect])
            OUTER["jobs"].close()
        assert not await store.read("spawned")
    refused = {e: g for e, g in got.items() if not g.startswith("ConfigurationError: ")}
    assert not refused, refused


class Outliver(Actor[Empty]):
    """Starts a task in a task group outside the step (the handler's own spawn: the step's
    task), which makes each effect only after the step returned."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Ping) -> str:
        async def late() -> None:
            await OUTER["returned"].wait()
            for effect in EFFECTS:
                OUTER["late"][effect] = await outcome(effect_of(ctx, effect))
            OUTER["finished"].set()

        OUTER["tg"].start_soon(late)
        return "started"


@pytest.mark.anyio
async def test_a_task_the_handler_started_is_refused_once_the_step_returned(
    tmp_path: Path,
) -> None:
    """docs/classes.md: a ``ctx`` effect from a task the handler started (in a task group
    outside the step) that still runs after the step returned is refused at the call, and
    nothing is logged."""
    OUTER.clear()
    OUTER.update(late={}, returned=anyio.Event(), finished=anyio.Event())
    store = SqliteStore(tmp_path / "a.db")
    async with (
        anyio.create_task_group() as tg,
        ActorSystem(store, actors=[Outliver, Sink]) as system,
    ):
        OUTER["tg"] = tg
        OUTER["sink"] = await system.spawn(Sink, "sink")
        ref = await system.spawn(Outliver, "o")
        assert await ref.ask(Ping(1), message_id="p1") == "started"
        before = await store.read("o")
        OUTER["returned"].set()
        with anyio.fail_after(10):
            await OUTER["finished"].wait()
        assert await store.read("o") == before
        late = dict(OUTER["late"])
        OUTER.update(late={}, returned=anyio.Event(), finished=anyio.Event())
        assert await ref.ask(Ping(2), message_id="p2") == "started"  # the actor goes on
        OUTER["returned"].set()
        with anyio.fail_after(10):
            await OUTER["finished"].wait()
        assert not await store.read("spawned")
    assert set(late) == set(EFFECTS)
    refused = {e: g for e, g in late.items() if not g.startswith("ConfigurationError: ")}
    assert not refused, refused
